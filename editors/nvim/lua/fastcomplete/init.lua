-- fastcomplete for Neovim: starts `fastcomplete serve` and makes its completions feel native.
-- Neovim 0.12+: native vim.lsp.inline_completion. 0.10/0.11: ghost text drawn with extmarks
-- from raw textDocument/inlineCompletion requests.
-- Where the cursor rests is sent to the server (fastcomplete/didFocus) so it warms the prompt
-- there before the next keystroke; its state (fastcomplete/status: loading, ready, error) is kept
-- in vim.g.fastcomplete_status and announced with the User FastcompleteStatus autocmd.
-- In the statusline: vim.o.statusline = "%f %= %{v:lua.require'fastcomplete'.statusline()}"
-- Keys (insert mode, all configurable in setup, false or '' to leave one unmapped): accept the
-- suggestion, its next word or the rest of its line, ask for suggestions now (up to 3 to cycle
-- through: the server gives more on an Invoked request than on the Automatic ones typing sends),
-- and show the next or the previous one.
local M = {}

M.defaults = {
  cmd = { 'fastcomplete', 'serve' },
  cmd_env = nil,
  filetypes = { 'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact', 'go', 'rust', 'lua' },
  settings = {}, -- the server's `fastcomplete` section: fastMode, maxTokens, multiline, ...
  accept_key = '<Tab>', -- accepts a suggestion; falls through to the key's normal action otherwise
  -- The other keys follow copilot.vim's. The accept keys fall through as accept_key does.
  accept_word_key = '<M-Right>', -- the suggestion's next word (with the spaces/punctuation before it)
  accept_line_key = '<M-C-Right>', -- the rest of the suggestion's current line
  suggest_key = '<M-\\>', -- ask for suggestions now (triggerKind Invoked: up to 3 alternatives)
  next_key = '<M-]>', -- the next alternative (asks for them first when only one is known)
  prev_key = '<M-[>', -- the previous one
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
local INVOKED, AUTOMATIC = 1, 2 -- lsp.InlineCompletionTriggerKind
local legacy = {
  ns = vim.api.nvim_create_namespace('fastcomplete.ghost'),
  timer = nil,
  items = nil, -- the latest answer's items
  index = 1, -- which of them is shown
  item = nil, -- the one shown, nil when none is
}

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

-- Asking for suggestions ----------------------------------------------------------------------

-- Where the cursor is in which text: an answer is shown only where it was asked for.
local function here(bufnr)
  local cursor = vim.api.nvim_win_get_cursor(0)
  return { vim.api.nvim_get_current_buf() == bufnr and vim.api.nvim_buf_get_changedtick(bufnr), cursor[1], cursor[2] }
end

--- Ask the server for suggestions at the cursor with the given triggerKind; `on_items(items, ctx)`
--- gets a non-empty answer that is still current (same text, same cursor, insert mode).
local function ask(bufnr, kind, on_items)
  local client = M.client(bufnr)
  if not client or not client.initialized or vim.api.nvim_get_current_buf() ~= bufnr then
    return false
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind }
  local asked = here(bufnr)
  request(client, 'textDocument/inlineCompletion', params, function(err, result, ctx)
    if err or not result or not vim.api.nvim_buf_is_valid(bufnr) then
      return
    end
    if vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' or not vim.deep_equal(here(bufnr), asked) then
      return
    end
    local items = result.items or result
    if items[1] then
      on_items(items, ctx)
    end
  end, bufnr)
  return true
end

-- Neovim 0.12 has no public way to request with triggerKind Invoked (its own requests are all
-- Automatic) nor to show items fetched by someone else. The buffer's inline-completion state,
-- reached through vim.lsp._capability, does both (its handler shows the first item, as for its
-- own requests); nil where that inside has changed, and those features then do less.
local function completor(bufnr)
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local class = ok and type(capability) == 'table' and type(capability.all) == 'table' and capability.all.inline_completion
  local state = type(class) == 'table' and type(class.active) == 'table' and class.active[bufnr]
  if type(state) == 'table' and type(state.handler) == 'function' and type(state.count_items) == 'function'
    and type(state.client_state) == 'table' then
    return state
  end
end

-- Drop Neovim's Automatic request still to go (typing's debounce): answered after ours, it would
-- replace the alternatives with one.
local function cancel_automatic(state)
  if state and type(state.reset_timer) == 'function' then
    state:reset_timer()
  end
end

local function native_show(bufnr, items, ctx)
  local state = completor(bufnr)
  if not state or not state.client_state[ctx.client_id] then
    return false
  end
  cancel_automatic(state)
  state:handler(nil, { items = items }, ctx)
  return true
end

-- Ghost text for Neovim 0.10/0.11 ------------------------------------------------------------

local function legacy_clear(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, legacy.ns, 0, -1)
  legacy.item, legacy.items = nil, nil
end

local function legacy_show(bufnr, index, hint)
  vim.api.nvim_buf_clear_namespace(bufnr, legacy.ns, 0, -1)
  local item = legacy.items[index]
  local text = type(item.insertText) == 'string' and item.insertText or item.insertText.value
  local lines = vim.split(text, '\n', { plain = true })
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local chunks = {}
  for i, line in ipairs(lines) do
    chunks[i] = { { line, 'Comment' } }
  end
  if hint then
    table.insert(chunks[#chunks], { hint, 'Comment' })
  end
  vim.api.nvim_buf_set_extmark(bufnr, legacy.ns, row - 1, col, {
    virt_text = chunks[1],
    virt_text_pos = 'inline',
    virt_lines = { unpack(chunks, 2) },
  })
  legacy.item, legacy.index = item, index
end

local function legacy_set(bufnr, items)
  legacy.items = items
  legacy_show(bufnr, 1)
end

local function legacy_select(bufnr, count)
  if not legacy.item then
    return
  end
  local n = #legacy.items
  local index = (legacy.index - 1 + count) % n + 1
  legacy_show(bufnr, index, (' (%d/%d)'):format(index, n))
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
        ask(bufnr, AUTOMATIC, function(items)
          legacy_set(bufnr, items)
        end)
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
  -- Every field the server sends (state, message, fastMode, and any it adds later).
  vim.g.fastcomplete_status = vim.tbl_extend('force', {}, params or {})
  vim.api.nvim_exec_autocmds('User', { pattern = 'FastcompleteStatus', modeline = false })
  vim.cmd.redrawstatus() -- a statusline showing M.statusline() would not change until a redraw
end

-- How long the latest answered inline completion took, as VS Code's status bar shows it: from
-- the request to its answer, counted when a suggestion is shown after it. Kept in
-- vim.g.fastcomplete_latency_ms; LspRequest sees every request (Neovim's own and ours).
local started = {} -- request id -> hrtime
local hrtime = (vim.uv or vim.loop).hrtime

local function shown(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return false
  end
  local ns = native and vim.api.nvim_create_namespace('nvim.lsp.inline_completion') or legacy.ns
  return #vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { limit = 1 }) > 0
end

local function on_request(ev)
  local data = ev.data or {}
  local req = data.request or {}
  if req.method ~= 'textDocument/inlineCompletion' then
    return
  end
  local client = vim.lsp.get_client_by_id(data.client_id)
  if not client or client.name ~= 'fastcomplete' then
    return
  end
  local id = data.request_id
  if req.type == 'pending' then
    started[id] = hrtime()
  elseif req.type == 'complete' and started[id] then
    local ms = (hrtime() - started[id]) / 1e6
    started[id] = nil
    vim.schedule(function() -- after the answer's handler, which shows it (or not)
      if shown(req.bufnr) then
        vim.g.fastcomplete_latency_ms = math.floor(ms + 0.5)
        vim.cmd.redrawstatus()
      end
    end)
  else
    started[id] = nil -- cancelled: the answer that follows is no completion
  end
end

--- A short word on the server for the statusline; '' before any server has spoken.
--- Ready: the model completing (fast or standard) and the latest completion's latency.
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
  local latency = vim.g.fastcomplete_latency_ms
  return 'fastcomplete: ' .. (fast and 'fast' or 'standard') .. (latency and (' %d ms'):format(latency) or '')
end

-- Accepting, partly accepting, alternatives ----------------------------------------------------

--- Accept the shown suggestion; true when there was one.
function M.accept(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if native then
    return vim.lsp.inline_completion.get({ bufnr = bufnr })
  end
  return legacy_accept(bufnr)
end

--- The start of `rest` (the suggestion after the cursor) that accepting a 'word' or a 'line'
--- takes. A word: the spaces and punctuation before the next word, and that word. A line: the
--- rest of the suggestion's current line, without its line break. Where that line ends at the
--- cursor, the line break and the next line's indentation (word) or the whole next line (line).
function M.next_piece(rest, kind)
  local eol = rest:find('\n', 1, true)
  if eol == 1 then
    local next_line = rest:match('^\n([^\n]*)')
    return '\n' .. (kind == 'line' and next_line or next_line:match('^%s*'))
  end
  local line = eol and rest:sub(1, eol - 1) or rest
  if kind == 'line' then
    return line
  end
  return line:match('^[^%w_\128-\255]*[%w_\128-\255]*') -- bytes >= 128: letters of UTF-8 words
end

--- The server's method for a partial accept: {textDocument: {uri}, position (where the piece
--- went), acceptedLength (UTF-16 code units), kind: 'word' | 'line', text}; the server watches
--- how much of the text is still there later. A server without it ignores it (pygls logs it).
M.partial_accept_method = 'fastcomplete/didPartiallyAccept'

local function utf16_len(text)
  if has_011 then
    return vim.str_utfindex(text, 'utf-16')
  end
  return select(2, vim.str_utfindex(text))
end

-- row (0-based) and col (bytes): where the piece was inserted.
local function report_partial(bufnr, piece, kind, row, col)
  local client = M.client(bufnr)
  if client and client.initialized then
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
    notify(client, M.partial_accept_method, {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      position = { line = row, character = utf16_len(line:sub(1, col)) },
      acceptedLength = utf16_len(piece),
      kind = kind,
      text = piece,
    })
  end
end

-- Insert `text` over the range (vim.Range) or at the cursor; the cursor goes after it.
local function insert(bufnr, text, range)
  local lines = vim.split(text, '\n', { plain = true })
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local sr, sc, er, ec = row - 1, col, row - 1, col
  if range then
    sr, sc, er, ec = range.start.row, range.start.col, range.end_.row, range.end_.col
  end
  vim.api.nvim_buf_set_text(bufnr, sr, sc, er, ec, lines)
  vim.api.nvim_win_set_cursor(0, { sr + #lines, (#lines == 1 and sc or 0) + #lines[#lines] })
end

-- All of it, as Neovim's own accept does, with the item's command (the server counts it).
local function accept_whole(bufnr, item)
  local text = item.insert_text
  if type(text) == 'string' then
    insert(bufnr, text, item.range)
  elseif text.kind == 'snippet' then
    vim.snippet.expand(text.value)
  end
  if item.command then
    M.command(item.command.command, item.command.arguments, nil, bufnr)
  end
end

-- Show what is left of a partly accepted suggestion at once (the Automatic request the cursor's
-- move brings gets the same from the server's memory of what it showed: no model run).
local function show_rest(bufnr, item, rest)
  if native and rest ~= '' then
    native_show(bufnr, { { insertText = rest, command = item.command } }, {
      client_id = item.client_id,
      bufnr = bufnr,
      method = 'textDocument/inlineCompletion',
    })
  end
end

-- item: a vim.lsp.inline_completion.Item (insert_text, range, command, client_id).
local function accept_piece(bufnr, item, kind)
  if vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local text, rest = item.insert_text, nil
  if type(text) == 'string' then
    rest = text
    if item.range then -- the text from the range's start to the cursor is typed already
      local row, col = unpack(vim.api.nvim_win_get_cursor(0))
      local start = item.range.start
      local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, true)[1]
      local typed = start.row == row - 1 and start.col <= col and line:sub(start.col + 1, col)
      rest = typed and vim.startswith(text, typed) and text:sub(#typed + 1) or nil
    end
  end
  local piece = rest and M.next_piece(rest, kind)
  if not piece or piece == '' or piece == rest then
    return accept_whole(bufnr, item)
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  insert(bufnr, piece)
  report_partial(bufnr, piece, kind, row - 1, col)
  show_rest(bufnr, item, rest:sub(#piece + 1))
end

--- Accept the next 'word' or the rest of the 'line' of the shown suggestion; true when one was
--- shown. The rest stays shown; all of it accepted runs the item's command as accept does.
function M.accept_part(kind, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if native then
    return vim.lsp.inline_completion.get({
      bufnr = bufnr,
      on_accept = function(item) -- scheduled by Neovim: free to edit the buffer
        accept_piece(bufnr, item, kind)
      end,
    })
  end
  local item = legacy.item
  if not item then
    return false
  end
  legacy_clear(bufnr)
  vim.schedule(function()
    accept_piece(bufnr, { insert_text = item.insertText, command = item.command }, kind)
  end)
  return true
end

function M.accept_word(bufnr)
  return M.accept_part('word', bufnr)
end

function M.accept_line(bufnr)
  return M.accept_part('line', bufnr)
end

local invoked = {} -- bufnr -> here(): where the latest answer to an Invoked request was shown

--- Ask for suggestions now, with triggerKind Invoked (the server answers with up to 3
--- alternatives; typing brings Automatic requests, answered with one). `on_shown(n)` is called
--- once the n items are shown. False when no request could be sent.
function M.suggest(bufnr, on_shown)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if native then
    cancel_automatic(completor(bufnr))
  end
  return ask(bufnr, INVOKED, function(items, ctx)
    if native then
      if not native_show(bufnr, items, ctx) then
        return
      end
    else
      legacy_set(bufnr, items)
    end
    invoked[bufnr] = here(bufnr)
    if on_shown then
      on_shown(#items)
    end
  end)
end

--- How many alternatives there are to cycle through (nil: unknown, Neovim's inside changed).
function M.count(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not native then
    return legacy.item and #legacy.items or 0
  end
  local state = completor(bufnr)
  if state then
    return state.current and state:count_items() or 0
  end
end

--- Show the alternative `count` places on (negative: back), wrapping around. With only one
--- known, the alternatives are asked for first (an Invoked request, once per place).
function M.select(count, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local function step()
    if native then
      vim.lsp.inline_completion.select({ bufnr = bufnr, count = count })
    else
      legacy_select(bufnr, count)
    end
  end
  local n = M.count(bufnr)
  if n == nil or n > 1 or vim.deep_equal(invoked[bufnr], here(bufnr)) then
    return step()
  end
  M.suggest(bufnr, function(got)
    if n == 1 and got > 1 then -- one was shown: move on from the first
      step()
    end
  end)
end

local function map_keys(bufnr)
  local function map(key, rhs, desc, expr)
    if key and key ~= '' then
      vim.keymap.set('i', key, rhs, { buffer = bufnr, expr = expr, desc = 'fastcomplete: ' .. desc })
    end
  end
  -- Accepting keys fall through to their normal action when no suggestion is shown.
  local function accepting(key, accept, desc)
    map(key, function()
      if accept(bufnr) then
        return ''
      end
      return vim.api.nvim_replace_termcodes(key, true, false, true)
    end, desc, true)
  end
  accepting(config.accept_key, M.accept, 'accept the suggestion')
  accepting(config.accept_word_key, M.accept_word, "accept the suggestion's next word")
  accepting(config.accept_line_key, M.accept_line, "accept the rest of the suggestion's line")
  map(config.suggest_key, function() M.suggest(bufnr) end, 'ask for suggestions now')
  map(config.next_key, function() M.select(1, bufnr) end, 'show the next suggestion')
  map(config.prev_key, function() M.select(-1, bufnr) end, 'show the previous suggestion')
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
    vim.g.fastcomplete_latency_ms = nil -- the other model's latency is yet to be seen
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
  map_keys(bufnr)
  focus_attach(bufnr)
  return id
end

function M.setup(opts)
  config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  vim.g.fastcomplete_fast_mode = config.settings.fastMode ~= false
  create_commands()
  local group = vim.api.nvim_create_augroup('fastcomplete', { clear = true })
  vim.api.nvim_create_autocmd('LspRequest', { group = group, callback = on_request })
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
