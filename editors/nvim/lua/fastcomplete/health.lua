-- :checkhealth fastcomplete
local M = {}

function M.check()
  local health = vim.health
  local config = require('fastcomplete').config()
  health.start('fastcomplete')
  local exe = config.cmd[1]
  if vim.fn.executable(exe) == 1 then
    health.ok('server found: ' .. vim.fn.exepath(exe))
  else
    health.error('server not found: ' .. exe, { 'pip install fastcomplete (or set cmd in setup{})' })
    return
  end
  local paths = { fast = config.settings.fastModelPath, standard = config.settings.standardModelPath }
  if paths.fast or paths.standard then
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
    return M.mode(health)
  end
  -- The same command line as the server, with `models list --json` in place of `serve`.
  local cmd = vim.list_slice(config.cmd, 1, #config.cmd - (config.cmd[#config.cmd] == 'serve' and 1 or 0))
  vim.list_extend(cmd, { 'models', 'list', '--json' })
  local listing = vim.system(cmd, { text = true, env = config.cmd_env }):wait()
  local ok, models = pcall(vim.json.decode, listing.stdout or '')
  if listing.code ~= 0 or not ok then
    health.error('could not list models: ' .. (listing.stderr or ''))
  elseif #models == 0 then
    health.warn('no models built', { 'run `fastcomplete models build`' })
  else
    for _, m in ipairs(models) do
      local line = ('%s/%s (%s)'):format(m.name, m.variant, m.precision or '?')
      if m.ok then
        health.ok('model ' .. line)
      else
        health.error('model ' .. line .. ': ' .. table.concat(m.problems or {}, '; '))
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
