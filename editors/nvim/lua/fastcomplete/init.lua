-- fastcomplete for Neovim: starts `fastcomplete serve` and makes its completions feel native.
-- Neovim 0.12+: native vim.lsp.inline_completion. 0.10/0.11: ghost text drawn with extmarks
-- from raw textDocument/inlineCompletion requests.
-- Where the cursor rests is sent to the server (fastcomplete/didFocus) so it warms the prompt
-- there before the next keystroke; its state (fastcomplete/status: loading, ready, error) is kept
-- in vim.g.fastcomplete_status and announced with the User FastcompleteStatus autocmd.
-- In the statusline: vim.o.statusline = "%f %= %{v:lua.require'fastcomplete'.statusline()}"
local M = {}

M.defaults = {
  cmd = { 'fastcomplete', 'serve' },
  cmd_env = nil,
  filetypes = { 'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact', 'go', 'rust', 'lua' },
  settings = {}, -- the server's `fastcomplete` section: fastMode, maxTokens, multiline, ...
  accept_key = '<Tab>', -- accepts a suggestion; falls through to the key's normal action otherwise
  debounce_ms = 150, -- 0.10/0.11 ghost text only: wait after the last keystroke
  focus_debounce_ms = 150, -- wait for the cursor to rest before telling the server where it is
}

local config = vim.deepcopy(M.defaults)
local has_011 = vim.fn.has('nvim-0.11') == 1

-- client:request()/client:notify() on 0.11+, client.request() before (no method form yet).
local function request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function notify(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local native = vim.lsp.inline_completion ~= nil
local legacy = { ns = vim.api.nvim_create_namespace('fastcomplete.ghost'), timer = nil, item = nil }

function M.client(bufnr)
  return vim.lsp.get_clients({ name = 'fastcomplete', bufnr = bufnr or 0 })[1]
    or vim.lsp.get_clients({ name = 'fastcomplete' })[1]
end

--- Run a server command; `on_result(result)` gets its answer.
function M.command(name, arguments, on_result, bufnr)
  local client = M.client(bufnr)
  if not client then
    vim.notify('fastcomplete: the server is not running in this buffer', vim.log.levels.WARN)
    return
  end
  request(client, 'workspace/executeCommand', { command = name, arguments = arguments }, function(err, result)
    if err then
      vim.notify('fastcomplete: ' .. (err.message or tostring(err)), vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end, bufnr or 0)
end

-- Ghost text for Neovim 0.10/0.11 ------------------------------------------------------------

local function legacy_clear(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, legacy.ns, 0, -1)
  legacy.item = nil
end

local function legacy_show(bufnr, item)
  legacy_clear(bufnr)
  local text = type(item.insertText) == 'string' and item.insertText or item.insertText.value
  local lines = vim.split(text, '\n', { plain = true })
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'Comment' } }
  end
  vim.api.nvim_buf_set_extmark(bufnr, legacy.ns, row - 1, col, {
    virt_text = { { lines[1], 'Comment' } },
    virt_text_pos = 'inline',
    virt_lines = virt_lines,
  })
  legacy.item = item
end

local function legacy_request(bufnr)
  local client = M.client(bufnr)
  if not client then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 2 }
  request(client, 'textDocument/inlineCompletion', params, function(err, result)
    if err or not result or vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
      return
    end
    local items = result.items or result
    if items and items[1] then
      legacy_show(bufnr, items[1])
    end
  end, bufnr)
end

local function legacy_accept(bufnr)
  local item = legacy.item
  if not item then
    return false
  end
  legacy_clear(bufnr)
  local text = type(item.insertText) == 'string' and item.insertText or item.insertText.value
  vim.schedule(function()
    vim.api.nvim_paste(text, false, -1)
    if item.command then
      M.command(item.command.command, item.command.arguments, nil, bufnr)
    end
  end)
  return true
end

local function legacy_attach(bufnr)
  local group = vim.api.nvim_create_augroup('fastcomplete.ghost.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'TextChangedI', 'CursorMovedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      legacy_clear(bufnr)
      if legacy.timer then
        legacy.timer:stop()
      end
      legacy.timer = vim.defer_fn(function()
        legacy_request(bufnr)
      end, config.debounce_ms)
    end,
  })
  vim.api.nvim_create_autocmd('InsertLeave', { group = group, buffer = bufnr, callback = function() legacy_clear(bufnr) end })
end

-- Cursor focus and server status ------------------------------------------------------------

local focus_timer = nil

-- LSP positions count UTF-16 code units; the cursor column is a byte offset.
local function cursor_position()
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local line = vim.api.nvim_get_current_line()
  col = math.min(col, #line)
  local character
  if has_011 then
    character = vim.str_utfindex(line, 'utf-16', col, false)
  else
    character = select(2, vim.str_utfindex(line, col))
  end
  return { line = row - 1, character = character }
end

local function send_focus(bufnr)
  -- By the time a debounced focus fires, the cursor may be in another buffer: that one's own
  -- BufEnter has told the server already.
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  -- A client counts as attached before the server has answered `initialize`; nothing but
  -- requests for that answer may be sent until then (didOpen warms the file meanwhile).
  local client = vim.lsp.get_clients({ name = 'fastcomplete', bufnr = bufnr })[1]
  if not client or not client.initialized then
    return
  end
  notify(client, 'fastcomplete/didFocus', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = cursor_position(),
  })
end

local function focus_attach(bufnr)
  focus_timer = focus_timer or (vim.uv or vim.loop).new_timer()
  local group = vim.api.nvim_create_augroup('fastcomplete.focus.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'CursorMoved', 'CursorMovedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      -- One timer for all buffers: restarting it drops the focus of a cursor that moved on.
      focus_timer:start(config.focus_debounce_ms, 0, vim.schedule_wrap(function()
        send_focus(bufnr)
      end))
    end,
  })
  vim.api.nvim_create_autocmd('BufEnter', {
    group = group,
    buffer = bufnr,
    callback = function()
      focus_timer:stop()
      send_focus(bufnr)
    end,
  })
end

local function on_status(_, params)
  vim.g.fastcomplete_status = {
    state = params.state,
    message = params.message,
    fastMode = params.fastMode,
  }
  vim.api.nvim_exec_autocmds('User', { pattern = 'FastcompleteStatus', modeline = false })
  vim.cmd.redrawstatus() -- a statusline showing M.statusline() would not change until a redraw
end

--- A short word on the server for the statusline; '' before any server has spoken.
function M.statusline()
  local status = vim.g.fastcomplete_status
  if type(status) ~= 'table' then
    return ''
  end
  if status.state == 'loading' then
    return 'fastcomplete: loading…'
  elseif status.state == 'error' then
    return 'fastcomplete: error'
  end
  local fast = vim.g.fastcomplete_fast_mode -- set by setup and toggle_fast: the latest word
  if fast == nil then
    fast = status.fastMode
  end
  return 'fastcomplete: ' .. (fast and 'fast' or 'standard')
end

-- Accepting -----------------------------------------------------------------------------------

--- Accept the shown suggestion; true when there was one.
function M.accept(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if native then
    return vim.lsp.inline_completion.get({ bufnr = bufnr })
  end
  return legacy_accept(bufnr)
end

local function map_accept(bufnr)
  if not config.accept_key or config.accept_key == '' then
    return
  end
  vim.keymap.set('i', config.accept_key, function()
    if M.accept(bufnr) then
      return ''
    end
    return vim.api.nvim_replace_termcodes(config.accept_key, true, false, true)
  end, { buffer = bufnr, expr = true, desc = 'fastcomplete: accept the suggestion' })
end

-- Commands ------------------------------------------------------------------------------------

local function selection_range(opts)
  local first, last = opts.line1 - 1, opts.line2 - 1
  local last_line = vim.api.nvim_buf_get_lines(0, last, last + 1, true)[1] or ''
  return {
    start = { line = first, character = 0 },
    ['end'] = { line = last, character = vim.str_utfindex(last_line, 'utf-16') },
  }
end

--- A floating window that fills while the explanation streams in.
function M.explain(opts)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].filetype = 'markdown'
  local width = math.min(90, math.floor(vim.o.columns * 0.8))
  local win = vim.api.nvim_open_win(buf, false, {
    relative = 'editor', width = width, height = math.floor(vim.o.lines * 0.5),
    row = 2, col = math.floor((vim.o.columns - width) / 2), border = 'rounded',
    title = ' fastcomplete: explain ', style = 'minimal',
  })
  vim.wo[win].wrap = true
  local function fill(text)
    if vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true }))
    end
  end
  fill('…')
  local group = vim.api.nvim_create_augroup('fastcomplete.explain', { clear = true })
  vim.api.nvim_create_autocmd('LspProgress', {
    group = group,
    callback = function(ev)
      local params = ev.data and ev.data.params or {}
      local value = params.value or {}
      if tostring(params.token):find('explain', 1, true) and value.kind == 'report' and value.message then
        fill(value.message)
      end
    end,
  })
  local args = { { uri = vim.uri_from_bufnr(0), range = selection_range(opts) } }
  M.command('fastcomplete.explain', args, function(result)
    vim.api.nvim_del_augroup_by_id(group)
    fill(result.markdown)
  end)
  return buf, win
end

function M.toggle_fast()
  M.command('fastcomplete.toggleFastMode', {}, function(result)
    vim.g.fastcomplete_fast_mode = result.fastMode
    vim.notify('fastcomplete: ' .. (result.fastMode and 'fast (INT8) model' or 'standard (FP32) model'))
  end)
end

function M.stats()
  M.command('fastcomplete.stats', {}, function(result)
    vim.g.fastcomplete_last_stats = result
    vim.notify(vim.inspect(result))
  end)
end

local function create_commands()
  vim.api.nvim_create_user_command('FastcompleteExplain', M.explain, { range = true, desc = 'Explain the selected code' })
  vim.api.nvim_create_user_command('FastcompleteToggleFast', M.toggle_fast, { desc = 'Switch between the fast and the standard model' })
  vim.api.nvim_create_user_command('FastcompleteStats', M.stats, { desc = 'Show fastcomplete statistics' })
end

-- Setup ---------------------------------------------------------------------------------------

local function start(bufnr)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local root = vim.fs.root(bufnr, { '.git', 'pyproject.toml', 'package.json', 'go.mod', 'Cargo.toml' })
    or (path ~= '' and vim.fs.dirname(path)) or vim.fn.getcwd()
  local id = vim.lsp.start({
    name = 'fastcomplete',
    cmd = config.cmd,
    cmd_env = config.cmd_env,
    root_dir = root,
    init_options = config.settings,
    settings = { fastcomplete = config.settings },
    handlers = { ['fastcomplete/status'] = on_status },
  }, { bufnr = bufnr })
  if native then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  else
    legacy_attach(bufnr)
  end
  map_accept(bufnr)
  focus_attach(bufnr)
  return id
end

function M.setup(opts)
  config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  vim.g.fastcomplete_fast_mode = config.settings.fastMode ~= false
  create_commands()
  local group = vim.api.nvim_create_augroup('fastcomplete', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = config.filetypes,
    callback = function(ev)
      start(ev.buf)
    end,
  })
  -- Buffers already open when setup runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype) then
      start(bufnr)
    end
  end
end

function M.config()
  return config
end

return M
