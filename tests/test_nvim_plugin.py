"""The Neovim plugin (editors/nvim) in a real headless Neovim 0.12: setup, suggest, accept,
toggle fast mode, explain into a floating window, health check."""

from __future__ import annotations

import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.lsp.helpers import REAL, SERVER_HOME

pytestmark = pytest.mark.real_model

pynvim = pytest.importorskip("pynvim")
NVIM = Path(sysconfig.get_paths()["scripts"]) / "nvim"
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
GHOST = """
local ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion')
local texts = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {details = true})) do
  for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(texts, chunk[1]) end
end
return table.concat(texts)
"""
FLOAT_TEXT = """
for _, win in ipairs(vim.api.nvim_list_wins()) do
  if vim.api.nvim_win_get_config(win).relative ~= '' then
    return table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\\n')
  end
end
return ''
"""


def _wait(fn, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := fn():
            return value
        time.sleep(0.1)
    raise TimeoutError(f"gave up after {timeout} s")


@pytest.fixture
def nvim(tmp_path: Path, real_model: Path, monkeypatch: pytest.MonkeyPatch):
    for kind in ("CONFIG", "DATA", "STATE", "CACHE"):
        monkeypatch.setenv(f"XDG_{kind}_HOME", str(tmp_path / kind.lower()))
    editor = pynvim.attach(
        "child", argv=[str(NVIM), "--embed", "--headless", "-u", "NONE", "-i", "NONE", "-n"]
    )
    settings = {
        "fastModelPath": str(REAL / "fast"),
        "standardModelPath": str(REAL / "standard"),
        "debounceMs": 0,
    }
    editor.exec_lua(
        SETUP, str(PLUGIN), sys.executable, settings, {"FASTCOMPLETE_HOME": SERVER_HOME}
    )
    yield editor
    editor.close()


def _open(nvim, tmp_path: Path) -> None:
    source = tmp_path / "shapes.py"
    source.write_text(
        "import math\n\n\ndef circle_area(radius: float) -> float:\n"
        '    """Area of a circle."""\n    return math.pi * radius'
    )
    nvim.command(f"edit {source}")  # FileType python: the plugin starts the server
    _wait(lambda: (nvim.exec_lua(STATS) or {}).get("modelsReady"), timeout=120)


def test_suggest_and_accept_with_the_accept_key(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("normal! G$")
    nvim.input("a")
    ghost = _wait(lambda: nvim.exec_lua(GHOST), timeout=30)
    before = nvim.current.buffer[-1]
    nvim.input("<Tab>")  # the plugin's accept key
    _wait(lambda: nvim.current.buffer[-1] != before, timeout=10)
    assert nvim.current.buffer[-1].startswith(before)
    assert ghost.strip() in nvim.current.buffer[-1]
    stats = _wait(lambda: (s := nvim.exec_lua(STATS)) and s["server"].get("accepted") and s)
    assert stats["server"]["accepted"] == 1


def test_accept_key_falls_through_without_a_suggestion(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("setlocal noexpandtab")
    nvim.command("normal! Go")
    nvim.input("x<Esc>")  # leaves insert mode: no suggestion is shown any more
    nvim.input("o<Tab>y<Esc>")
    _wait(lambda: nvim.current.buffer[-1] == "\ty", timeout=5)


def test_toggle_explain_and_health(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("FastcompleteToggleFast")
    _wait(lambda: nvim.vars.get("fastcomplete_fast_mode") is False, timeout=10)
    nvim.command("4,6FastcompleteExplain")
    streamed = _wait(lambda: (t := nvim.exec_lua(FLOAT_TEXT)) not in ("", "…") and t, timeout=60)
    final = _wait(
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
