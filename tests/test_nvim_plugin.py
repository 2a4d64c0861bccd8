"""The Neovim plugin (editors/nvim) in a real headless Neovim 0.12: setup, suggest, accept,
accept a word or a line, ask with triggerKind Invoked and cycle through the alternatives, toggle
fast mode, explain into a floating window, health check, cursor focus, server status."""

from __future__ import annotations

import re
import sys
import time
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


# Every didFocus the plugin sends, kept in _G.focus_sent (the client's notify, wrapped).
RECORD_FOCUS = """
_G.focus_sent = {}
local client = require('fastcomplete').client()
local notify = client.notify
client.notify = function(self, method, params)
  if method == 'fastcomplete/didFocus' then table.insert(_G.focus_sent, params) end
  return notify(self, method, params)
end
"""
# Each state fastcomplete/status brought, in order, seen through the User autocmd.
RECORD_STATES = """
_G.states = {}
vim.api.nvim_create_autocmd('User', {pattern = 'FastcompleteStatus', callback = function()
  table.insert(_G.states, vim.g.fastcomplete_status.state)
end})
"""
STATUSLINE = "return require('fastcomplete').statusline()"
# The triggerKind of every inline completion request (Neovim's own and the plugin's) and the
# partial accepts the plugin reports, kept in _G.kinds and _G.partial.
RECORD_SENT = """
_G.kinds, _G.partial = {}, {}
local fastcomplete = require('fastcomplete')
local client = fastcomplete.client()
local request, notify = client.request, client.notify
client.request = function(self, method, params, ...)
  if method == 'textDocument/inlineCompletion' then
    table.insert(_G.kinds, params.context.triggerKind)
  end
  return request(self, method, params, ...)
end
client.notify = function(self, method, params)
  if method == fastcomplete.partial_accept_method then table.insert(_G.partial, params) end
  return notify(self, method, params)
end
"""
# The shown suggestion as lines (its first line from the cursor on), and the "(i/n)" hint Neovim
# adds while cycling.
GHOST_PARTS = """
local ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion')
local lines, hint = {}, ''
local function add(chunks)
  local text = {}
  for _, chunk in ipairs(chunks) do
    if chunk[2] == 'ComplHintMore' then hint = chunk[1] else table.insert(text, chunk[1]) end
  end
  table.insert(lines, table.concat(text))
end
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {details = true})) do
  add(m[4].virt_text or {})
  for _, chunks in ipairs(m[4].virt_lines or {}) do add(chunks) end
end
return {lines = lines, hint = hint}
"""
HIDE = """
vim.api.nvim_buf_clear_namespace(0, vim.api.nvim_create_namespace('nvim.lsp.inline_completion'), 0, -1)
"""
# Where the models answer with more than one word on one line, and with several lines.
RETURN_TEXT = (
    'import math\n\n\ndef circle_area(radius: float) -> float:\n    """Area of a circle."""\n'
    "    return "
)
INIT_TEXT = "class Point:\n    def __init__(self, x, y):"


def _editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path, **more: object):
    editors = headless_nvim(tmp_path, monkeypatch)
    editor = next(editors)
    editor.exec_lua(RECORD_STATES)
    settings = {
        "fastModelPath": str(model / "fast"),
        "standardModelPath": str(model / "standard"),
        "debounceMs": 0,
        "preloadStandard": True,
        "showGate": False,  # what the model suggests, not what a person's gate lets through
        **more,
    }
    editor.exec_lua(
        SETUP, str(PLUGIN), sys.executable, settings, {"FASTCOMPLETE_HOME": SERVER_HOME}
    )
    yield editor
    editors.close()


@pytest.fixture
def nvim(tmp_path: Path, real_model: Path, monkeypatch: pytest.MonkeyPatch):
    yield from _editor(tmp_path, monkeypatch, real_model)


@pytest.fixture
def tiny_nvim(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    """The plugin on the tiny model: focus and status need a server, not good completions."""
    yield from _editor(tmp_path, monkeypatch, tiny_model)


@pytest.fixture
def quiet_nvim(tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch):
    """The plugin's `settings` asking for no automatic suggestions in comments."""
    yield from _editor(tmp_path, monkeypatch, tiny_model, quietIn={"*": ["comment"]})


@pytest.fixture
def modelless_nvim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The plugin pointed at model folders that do not exist."""
    yield from _editor(tmp_path, monkeypatch, tmp_path / "no-such-model")


def _open(nvim, tmp_path: Path, text: str | None = None) -> Path:
    source = tmp_path / "shapes.py"
    source.write_text(
        text
        or "import math\n\n\ndef circle_area(radius: float) -> float:\n"
        '    """Area of a circle."""\n    return math.pi * radius'
    )
    nvim.command(f"edit {source}")  # FileType python: the plugin starts the server
    # Both models loaded: the standard one loading beside a first request can push it past its
    # deadline on two cores (seen in CI: `timed_out`).
    wait_for(lambda: len((nvim.exec_lua(STATS) or {}).get("kv_cache_bytes") or {}) == 2, 120)
    return source


def test_suggest_and_accept_with_the_accept_key(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path)
    nvim.command("normal! G$")
    nvim.input("a")
    try:
        ghost = wait_for(lambda: nvim.exec_lua(GHOST), timeout=30)
    except TimeoutError as exc:  # say why the server showed nothing
        stats = nvim.exec_lua(STATS) or {}
        reasons = (stats.get("emptyReasons"), stats.get("server"))
        raise AssertionError(f"no suggestion: {reasons}") from exc
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
    # The server's own checks (`fastcomplete doctor --json`), as the command prints them.
    assert "device: " in report and "versions: Python" in report and "home: " in report
    assert "mode: standard" in report


def test_statusline_follows_the_server_status(tiny_nvim, tmp_path: Path) -> None:
    assert tiny_nvim.exec_lua(STATUSLINE) == ""  # no server has spoken yet
    _open(tiny_nvim, tmp_path)
    wait_for(lambda: tiny_nvim.exec_lua(STATUSLINE) == "fastcomplete: fast", timeout=60)
    status = tiny_nvim.vars["fastcomplete_status"]
    assert status["state"] == "ready" and status["fastMode"] is True
    assert tiny_nvim.exec_lua("return _G.states") == ["loading", "ready"]
    tiny_nvim.vars["fastcomplete_fast_mode"] = False  # what :FastcompleteToggleFast leaves
    assert tiny_nvim.exec_lua(STATUSLINE) == "fastcomplete: standard"


def test_cursor_moves_tell_the_server_where_the_cursor_rests(tiny_nvim, tmp_path: Path) -> None:
    # Before "+": ü and ï are 2 bytes and 1 UTF-16 unit each, 🐍 is 4 bytes and 2 units.
    line = '    return "ünïcode 🐍" + name'
    source = _open(tiny_nvim, tmp_path, f"def greet(name):\n{line}\n")
    uri = source.as_uri()
    # Read before recording starts: a focus sent in between is counted by the server only.
    focused = tiny_nvim.exec_lua(STATS)["server"].get("focus", 0)
    tiny_nvim.exec_lua(RECORD_FOCUS)
    before = line[: line.index("+")]
    utf16 = len(before.encode("utf-16-le")) // 2
    assert utf16 == len(before) + 1 < len(before.encode())  # the emoji's surrogate pair
    expected = {"textDocument": {"uri": uri}, "position": {"line": 1, "character": utf16}}
    tiny_nvim.input("G0f+")  # typed keys: CursorMoved, then the 150 ms rest
    wait_for(lambda: expected in tiny_nvim.exec_lua("return _G.focus_sent"), timeout=30)
    wait_for(lambda: tiny_nvim.exec_lua(STATS)["server"].get("focus", 0) > focused, timeout=30)

    # Entering the buffer again tells the server at once, where the cursor is.
    other = tmp_path / "other.py"
    other.write_text("x = 1\n")
    tiny_nvim.command(f"edit {other}")
    count = len(tiny_nvim.exec_lua("return _G.focus_sent"))
    tiny_nvim.command(f"buffer {source}")
    # The cursor is back on the "+" of line 1 (other.py's own focus may come first).
    wait_for(lambda: expected in tiny_nvim.exec_lua("return _G.focus_sent")[count:], timeout=30)
    sent = tiny_nvim.exec_lua("return _G.focus_sent")
    wait_for(
        lambda: tiny_nvim.exec_lua(STATS)["server"].get("focus", 0) >= focused + len(sent),
        timeout=30,
    )


def test_statusline_tells_of_a_server_without_models(modelless_nvim, tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    modelless_nvim.command(f"edit {source}")
    wait_for(lambda: modelless_nvim.exec_lua(STATUSLINE) == "fastcomplete: error", timeout=60)
    status = modelless_nvim.vars["fastcomplete_status"]
    assert status["state"] == "error"
    assert "fast model" in status["message"] and "no-such-model" in status["message"]
    assert modelless_nvim.exec_lua("return _G.states")[-1] == "error"


def _suggested(nvim, check=lambda parts: True) -> dict:
    """The shown suggestion ({lines, hint}) once there is one that passes `check`."""
    try:
        return wait_for(
            lambda: (p := nvim.exec_lua(GHOST_PARTS))["lines"] and check(p) and p, timeout=30
        )
    except TimeoutError as exc:  # say why the server showed nothing
        stats = nvim.exec_lua(STATS) or {}
        reasons = (stats.get("emptyReasons"), stats.get("server"), nvim.exec_lua(GHOST_PARTS))
        raise AssertionError(f"no suggestion: {reasons}") from exc


def _server_counts(nvim) -> dict:
    return (nvim.exec_lua(STATS) or {}).get("server", {})


def test_accept_word_inserts_the_next_word_and_keeps_the_rest(nvim, tmp_path: Path) -> None:
    uri = _open(nvim, tmp_path, RETURN_TEXT).as_uri()
    nvim.exec_lua(RECORD_SENT)
    nvim.command("normal! G$")
    nvim.input("a")
    (ghost,) = _suggested(nvim)["lines"]
    before = nvim.current.buffer[-1]
    word = re.match(r"\W*\w*", ghost).group()
    assert word and word != ghost, f"the test needs a suggestion of several words: {ghost!r}"
    typed_through = _server_counts(nvim).get("type_through", 0)

    nvim.input("<M-Right>")  # the plugin's accept_word_key
    wait_for(lambda: nvim.current.buffer[-1] == before + word, timeout=10)
    rest = ghost[len(word) :]
    wait_for(lambda: nvim.exec_lua(GHOST_PARTS)["lines"] == [rest], timeout=10)  # at once
    # The cursor's move brings a request: the server answers it from the suggestion it showed.
    wait_for(lambda: _server_counts(nvim).get("type_through", 0) > typed_through, timeout=30)
    assert nvim.exec_lua(GHOST_PARTS)["lines"] == [rest]
    partial = {
        "textDocument": {"uri": uri},
        "position": {"line": len(nvim.current.buffer) - 1, "character": len(before)},
        "acceptedLength": len(word),
        "kind": "word",
        "text": word,
    }
    assert nvim.exec_lua("return _G.partial") == [partial]
    acceptance = wait_for(lambda: (nvim.exec_lua(STATS) or {}).get("acceptance"), timeout=10)
    assert (acceptance["partialWord"], acceptance["partialChars"]) == (1, len(word))
    assert "accepted" not in _server_counts(nvim)  # the server ignored the notification

    nvim.input("<Tab>")  # the rest, as a whole: the server counts the accept
    wait_for(lambda: nvim.current.buffer[-1] == before + ghost, timeout=10)
    wait_for(lambda: _server_counts(nvim).get("accepted") == 1, timeout=10)


def test_accept_line_inserts_the_rest_of_the_line_only(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path, INIT_TEXT)
    nvim.exec_lua(RECORD_SENT)
    nvim.command("normal! G$")
    nvim.input("a")
    lines = _suggested(nvim)[
        "lines"
    ]  # it starts on the line below: ['', '        self.x = x', ...]
    assert len(lines) >= 3 and lines[0] == "", f"the test needs 2 lines or more below: {lines!r}"
    indent = re.match(r"\s*", lines[1]).group()

    nvim.input("<M-Right>")  # a word at the end of the line: the line break and the indentation
    wait_for(lambda: nvim.current.buffer[-1] == indent, timeout=10)
    wait_for(lambda: nvim.exec_lua(GHOST_PARTS)["lines"] == [lines[1][len(indent) :], *lines[2:]])
    nvim.input("<M-C-Right>")  # the plugin's accept_line_key: the rest of this line, no more
    wait_for(lambda: nvim.current.buffer[-1] == lines[1], timeout=10)
    wait_for(lambda: nvim.exec_lua(GHOST_PARTS)["lines"] == ["", *lines[2:]], timeout=10)
    assert len(nvim.current.buffer) == 3
    sent = nvim.exec_lua("return _G.partial")
    assert [(p["kind"], p["acceptedLength"], p["text"]) for p in sent] == [
        ("word", 1 + len(indent), "\n" + indent),
        ("line", len(lines[1]) - len(indent), lines[1][len(indent) :]),
    ]
    last = len(nvim.current.buffer) - 1  # where each piece went: the line's end, then below
    assert [p["position"] for p in sent] == [
        {"line": last - 1, "character": len(nvim.current.buffer[last - 1])},
        {"line": last, "character": len(indent)},
    ]
    nvim.input("<M-C-Right>")  # the line break and the next line
    wait_for(lambda: nvim.current.buffer[-1] == lines[2], timeout=10)


def test_suggest_key_asks_with_trigger_kind_invoked(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path, RETURN_TEXT)
    nvim.exec_lua(RECORD_SENT)
    nvim.command("normal! G$")
    nvim.input("a")
    _suggested(nvim)
    assert set(nvim.exec_lua("return _G.kinds")) == {2}  # Neovim's own requests: Automatic
    # The statusline: the mode, and how long the shown completion took.
    wait_for(lambda: re.fullmatch(r"fastcomplete: fast \d+ ms", nvim.exec_lua(STATUSLINE)), 10)

    nvim.exec_lua("_G.kinds = {}")
    nvim.exec_lua(HIDE)  # what is shown now came from an Automatic request
    nvim.input("<M-\\>")  # the plugin's suggest_key
    wait_for(lambda: nvim.exec_lua("return _G.kinds") == [1], timeout=10)
    _suggested(nvim)  # the answer, shown by Neovim's own inline completion
    assert nvim.exec_lua("return require('fastcomplete').count()") >= 1


def test_cycling_shows_the_other_alternatives(nvim, tmp_path: Path) -> None:
    _open(nvim, tmp_path, RETURN_TEXT)
    nvim.command("normal! G$")
    nvim.input("a")
    (first,) = _suggested(nvim)["lines"]
    last = len(nvim.current.buffer) - 1  # the line the suggestion goes on

    nvim.input("<M-]>")  # one known: it asks for the alternatives (Invoked), then moves on
    second = _suggested(nvim, lambda p: p["hint"].startswith(" (2/"))
    count = int(re.fullmatch(r" \(2/(\d+)\)", second["hint"]).group(1))
    assert count >= 2 and second["lines"] != [first]
    assert nvim.exec_lua("return require('fastcomplete').count()") == count
    nvim.input("<M-[>")
    back = _suggested(nvim, lambda p: p["hint"] == f" (1/{count})")
    assert back["lines"] != second["lines"]
    nvim.input("<M-[>")  # wraps around to the last
    _suggested(nvim, lambda p: p["hint"] == f" ({count}/{count})")
    for _ in range(count - 2):
        nvim.input("<M-[>")
    _suggested(nvim, lambda p: p["hint"] == f" (2/{count})")
    before = nvim.current.buffer[last]
    nvim.input("<Tab>")  # accepts the one shown
    accepted = before + "\n".join(second["lines"])
    wait_for(lambda: "\n".join(nvim.current.buffer[last:]) == accepted, timeout=10)


def test_quiet_in_comments_reaches_the_server_through_the_plugins_settings(
    quiet_nvim, tmp_path: Path
) -> None:
    _open(quiet_nvim, tmp_path, "def total(values):\n    # the sum of\n    return sum(values)\n")

    def quiet() -> int:
        return quiet_nvim.exec_lua(STATS)["emptyReasons"].get("quiet_comment", 0)

    quiet_nvim.input("2GA all values")  # typed at the end of the comment, in insert mode
    wait_for(lambda: quiet() >= 1, 60)
    time.sleep(1.0)  # the last key's request is answered too
    held_back = quiet()
    quiet_nvim.input("<Esc>3GA")
    requests = quiet_nvim.exec_lua(STATS)["server"]["requests"]
    quiet_nvim.input(" + 1")  # in code: asked of the model as usual
    wait_for(lambda: quiet_nvim.exec_lua(STATS)["server"]["requests"] > requests, 60)
    time.sleep(1.0)
    assert quiet() == held_back
