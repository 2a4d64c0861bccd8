"""The Neovim plugin (editors/nvim) in a real headless Neovim 0.12: setup, suggest, accept,
toggle fast mode, explain into a floating window, health check."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.lsp.helpers import SERVER_HOME
from tests.nvim_helpers import GHOST, headless_nvim, wait_for

pytestmark = pytest.mark.real_model

PLUGIN = Path(__file__).resolve().parent.parent / "editors" / "nvim"

SETUP = """
local plugin, python, settings, env = ...
vim.cmd("filetype on")  -- as in any normal config (-u NONE turns detection off)
vim.opt.runtimepath:append(plugin)
require('fastcomplete').setup({
  cmd = { python, '-m', 'lsp_server.cli', 'serve' },
  cmd_env = env,
  settings = settings,
})
"""
STATS = """
local client = require('fastcomplete').client()
if not client then return nil end
local res = client:request_sync('workspace/executeCommand', {command = 'fastcomplete.stats'}, 5000)
return res and res.result
"""
FLOAT_TEXT = """
for _, win in ipairs(vim.api.nvim_list_wins()) do
  if vim.api.nvim_win_get_config(win).relative ~= '' then
    return table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\\n')
  end
end
return ''
"""


@pytest.fixture
def nvim(tmp_path: Path, real_model: Path, monkeypatch: pytest.MonkeyPatch):
    editors = headless_nvim(tmp_path, monkeypatch)
    editor = next(editors)
    settings = {
        "fastModelPath": str(real_model / "fast"),
        "standardModelPath": str(real_model / "standard"),
        "debounceMs": 0,
    }
    editor.exec_lua(
        SETUP, str(PLUGIN), sys.executable, settings, {"FASTCOMPLETE_HOME": SERVER_HOME}
    )
    yield editor
    editors.close()


def _open(nvim, tmp_path: Path) -> None:
    source = tmp_path / "shapes.py"
    source.write_text(
        "import math\n\n\ndef circle_area(radius: float) -> float:\n"
        '    """Area of a circle."""\n    return math.pi * radius'
    )
    nvim.command(f"edit {source}")  # FileType python: the plugin starts the server
    wait_for(lambda: (nvim.exec_lua(STATS) or {}).get("modelsReady"), timeout=120)


def test_suggest_and_accept_with_the_accept_key(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("normal! G$")
    nvim.input("a")
    ghost = wait_for(lambda: nvim.exec_lua(GHOST), timeout=30)
    before = nvim.current.buffer[-1]
    nvim.input("<Tab>")  # the plugin's accept key
    wait_for(lambda: nvim.current.buffer[-1] != before, timeout=10)
    assert nvim.current.buffer[-1].startswith(before)
    assert ghost.strip() in nvim.current.buffer[-1]
    stats = wait_for(lambda: (s := nvim.exec_lua(STATS)) and s["server"].get("accepted") and s)
    assert stats["server"]["accepted"] == 1


def test_accept_key_falls_through_without_a_suggestion(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("setlocal noexpandtab")
    nvim.command("normal! Go")
    nvim.input("x<Esc>")  # leaves insert mode: no suggestion is shown any more
    nvim.input("o<Tab>y<Esc>")
    wait_for(lambda: nvim.current.buffer[-1] == "\ty", timeout=5)


def test_toggle_explain_and_health(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("FastcompleteToggleFast")
    wait_for(lambda: nvim.vars.get("fastcomplete_fast_mode") is False, timeout=10)
    nvim.command("4,6FastcompleteExplain")
    streamed = wait_for(lambda: (t := nvim.exec_lua(FLOAT_TEXT)) not in ("", "…") and t, timeout=60)
    final = wait_for(
        lambda: (
            (t := nvim.exec_lua(FLOAT_TEXT))
            and len(t) > len(streamed) // 2
            and (nvim.exec_lua(STATS) or {}).get("server", {}).get("explains")
            and t
        ),
        timeout=60,
    )
    assert final.strip()
    stats = nvim.exec_lua(STATS)
    assert stats["models"]["smollm2-135m/standard"]["requests"] >= 1
    nvim.command("checkhealth fastcomplete")
    report = "\n".join(nvim.current.buffer[:])
    assert "server found" in report and "model smollm2-135m/fast" in report
    assert "mode: standard" in report
