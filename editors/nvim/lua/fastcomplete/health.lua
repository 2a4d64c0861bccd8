-- :checkhealth fastcomplete: the server's own checks (`fastcomplete doctor --json`), and the
-- model folders this config names.
local M = {}

-- The server's command line with `args` in place of `serve`.
local function command(config, args)
  local cmd = vim.list_slice(config.cmd, 1, #config.cmd - (config.cmd[#config.cmd] == 'serve' and 1 or 0))
  return vim.list_extend(cmd, args)
end

local function report(health, check)
  local advice = check.advice ~= '' and { check.advice } or nil
  local line = check.area .. ': ' .. check.message
  if check.level == 'ok' then
    health.ok(line)
  elseif check.level == 'warn' then
    health.warn(line, advice)
  elseif check.level == 'error' then
    health.error(line, advice)
  else
    health.info(line)
  end
end

function M.check()
  local health = vim.health
  local config = require('fastcomplete').config()
  health.start('fastcomplete')
  local exe = config.cmd[1]
  if vim.fn.executable(exe) == 1 then
    health.ok('server found: ' .. vim.fn.exepath(exe))
  else
    health.error('server not found: ' .. exe, {
      'in the fastcomplete repository: make dist, then uv tool install dist/fastcomplete-*.whl',
      'then: fastcomplete models build --install-build-env',
      'or set cmd in setup{}',
    })
    return
  end
  local paths = { fast = config.settings.fastModelPath, standard = config.settings.standardModelPath }
  for variant, dir in pairs(paths) do
    local ok, manifest = pcall(function()
      return vim.json.decode(table.concat(vim.fn.readfile(dir .. '/manifest.json'), '\n'))
    end)
    if ok then
      health.ok(('model %s/%s (%s) at %s'):format(manifest.name, manifest.variant, manifest.precision, dir))
    else
      health.error(('%s model: no readable manifest in %s'):format(variant, dir), { 'run `fastcomplete models build`' })
    end
  end
  local result = vim.system(command(config, { 'doctor', '--json' }), { text = true, env = config.cmd_env }):wait()
  local ok, checks = pcall(vim.json.decode, result.stdout or '')
  if not ok or type(checks) ~= 'table' then
    health.error('`fastcomplete doctor` did not answer: ' .. (result.stderr or ''))
  else
    for _, check in ipairs(checks) do
      -- This config's own model folders were checked above: the default model may be unbuilt.
      if not (check.area == 'model' and (paths.fast or paths.standard)) then
        report(health, check)
      end
    end
  end
  M.mode(health)
end

function M.mode(health)
  local fast = vim.g.fastcomplete_fast_mode ~= false
  health.info('mode: ' .. (fast and 'fast (INT8 model for completions)' or 'standard (FP32 model)'))
  health.info('inline completion: ' .. (vim.lsp.inline_completion and 'native (Neovim 0.12+)' or 'ghost text (extmarks)'))
end

return M
