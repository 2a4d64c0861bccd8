"""Fuzz tests for `fastcomplete serve`, end to end over stdio.

1. A hypothesis state machine drives one long-lived server (tiny model) through a real pytest-lsp
   client. It opens documents (non-ASCII, astral characters such as "𝔘" and "👋", CRLF and lone CR
   line endings, NUL bytes, empty documents, documents around the server's 1 MiB "large"
   threshold, percent-encoded URIs), applies random incremental edits (empty ranges, ranges over
   many lines, ends inside surrogate pairs or past the end of the document, inserts of up to
   ~200 KB, deleting everything, several changes in one notification, whole-document
   replacements) and sends random requests (inline completion anywhere, past-the-end positions
   included; `fastcomplete.stats`, `fastcomplete.toggleFastMode`). The test keeps its own copy of
   every document, edited by `apply_change` below, and after every step checks that the server
   holds the same text.

2. Malformed JSON-RPC over raw stdio, no LSP library: broken JSON, JSON that is not an object,
   wrong parameter types, unknown methods, a missing id, wrong Content-Length headers, a 20 MB
   message. After each one the server must still answer a normal request.

Position semantics (the reference model's, and what the server must do):
- Lines end at "\\r\\n", "\\n" or "\\r" (LSP 3.17, "Text Documents"); nothing else ends a line.
- A character past the end of a line means the end of that line, before its line break (LSP:
  "If the character value is greater than the line length it defaults back to the line length").
- In an edit, a line past the end of the document means the end of the document (as the LSP's
  reference implementation, vscode-languageserver-textdocument, does). In a request it is an
  error, -32602 "line N is past the end of the document (M lines)": the client asked about
  another version of the document.
- A position inside a surrogate pair is invalid per the spec. The server reads it as the position
  just after the pair (lsp_server/text/edits.py for edits, lsp_server/text/positions.py for requests), so an
  off-by-one client never splits a character into lone surrogates, which could not even be sent
  back in valid UTF-8 JSON. The reference model does the same.

Reading the document back: `fastcomplete.debugDocument` (arguments `[{"uri": ...}]`, result
`{"text": ...}`) gives the exact text; the check turns itself on when the server lists the command
in its executeCommandProvider. Independently of it, a read-only request every server has checks
the line count as the request path sees it: `fastcomplete.explain` on an empty selection at line
2**31-1 is refused with "line N is past the end of the document (M lines)", without a model.

The bugs it found have regression tests below. FASTCOMPLETE_FUZZ_EXAMPLES and
FASTCOMPLETE_FUZZ_STEPS change its size.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import json
import os
import re
import select
import socket
import subprocess
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.config.tuning import TREE_MAX_CHARS
from tests.lsp.helpers import SERVER, SERVER_HOME, model_options, start, wait_ready

DEBUG_COMMAND = "fastcomplete.debugDocument"
DEFAULT_EXAMPLES, DEFAULT_STEPS = 60, 80
EXAMPLES = int(os.environ.get("FASTCOMPLETE_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
STEPS = int(os.environ.get("FASTCOMPLETE_FUZZ_STEPS", DEFAULT_STEPS))
TIMEOUT = 30.0  # seconds for any one request; generous for a loaded 2-core machine
FAR = 2**31 - 1  # the largest LSP uinteger: past the end of any document
MAX_DOC = 600_000  # characters: no more huge inserts into a document this long
MAX_DOCS = 4
LARGE = TREE_MAX_CHARS  # beyond it, completions see the text around the cursor only
# maxTokens 4 and a small context keep every completion to a few milliseconds.
OPTIONS = {"maxTokens": 4, "contextTokens": 256}

# --------------------------------------------------------------------------------------------
# The reference model: LSP text edits in plain Python
# --------------------------------------------------------------------------------------------

EOL = re.compile(r"\r\n|\r|\n")
ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 units: a surrogate pair
# str.splitlines() also breaks at these; LSP does not.
NOT_EOL_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@functools.lru_cache(maxsize=16)
def lsp_lines(text: str) -> list[tuple[int, int]]:
    """(start, end of content) of every LSP line, as code-point offsets (do not mutate)."""
    spans, start = [], 0
    for match in EOL.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def lsp_offset(text: str, line: int, character: int, spans=None) -> int:
    """Code-point offset of an LSP position (UTF-16 character), clamped as described above."""
    spans = spans if spans is not None else lsp_lines(text)
    if line >= len(spans):
        return len(text)
    index, end = spans[line]
    units = 0
    while index < end and units < character:
        units += 2 if ord(text[index]) > 0xFFFF else 1
        index += 1  # inside a surrogate pair this steps past the pair
    return index


def apply_change(text: str, change: types.TextDocumentContentChangeEvent) -> str:
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return change.text
    spans = lsp_lines(text)
    rng = change.range
    start = lsp_offset(text, rng.start.line, rng.start.character, spans)
    end = lsp_offset(text, rng.end.line, rng.end.character, spans)
    start, end = sorted((start, end))
    return text[:start] + change.text + text[end:]


def anchors(text: str, line: int, character: int) -> set[tuple[int, int]]:
    """Where a completion requested at (line, character) may be anchored: the position clamped
    to the line's end; inside a surrogate pair, the client's position or the one after the pair."""
    start, end = lsp_lines(text)[line]
    row = text[start:end]
    clamped = min(character, utf16_len(row))
    snapped = utf16_len(row[: lsp_offset(row, 0, clamped)])
    return {(line, clamped), (line, snapped)}


def test_reference_model() -> None:
    """The reference model itself, on the cases the fuzzer leans on."""
    assert lsp_lines("a\r\nb\rc\nd") == [(0, 1), (3, 4), (5, 6), (7, 8)]
    assert lsp_lines("") == [(0, 0)]
    text = "x👋y\r\nz"
    assert lsp_offset(text, 0, 1) == 1
    assert lsp_offset(text, 0, 2) == 2  # inside the pair: after it
    assert lsp_offset(text, 0, 3) == 2
    assert lsp_offset(text, 0, 99) == 3  # past the end of the line: before "\r\n"
    assert lsp_offset(text, 1, 0) == 5
    assert lsp_offset(text, 7, 7) == len(text)
    rng = types.Range(types.Position(0, 2), types.Position(1, 0))
    edit = types.TextDocumentContentChangePartial(range=rng, text="-")
    assert apply_change(text, edit) == "x👋-z"
    assert anchors(text, 0, 99) == {(0, 4)}
    assert anchors(text, 0, 2) == {(0, 2), (0, 3)}


# --------------------------------------------------------------------------------------------
# A pytest-lsp client on a loop of its own, so that hypothesis's synchronous rules can drive it
# --------------------------------------------------------------------------------------------


class Harness:
    """One `fastcomplete serve` process and a client on an event loop in a background thread."""

    def __init__(self, options: dict[str, Any], log: Path) -> None:
        self.log = log
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: LanguageClient = self.run(self._start(options), timeout=180)
        commands = self.client.init_result.capabilities.execute_command_provider  # type: ignore[attr-defined]
        self.has_debug_hook = DEBUG_COMMAND in (commands.commands if commands else [])
        self.fast_mode = self.run(self.command("fastcomplete.stats"))["fastMode"]

    async def _start(self, options: dict[str, Any]) -> LanguageClient:
        # The server's log (a traceback for every refused request) goes to a file, not the test's
        # output: the probes below are refused thousands of times.
        command = ["/bin/sh", "-c", 'exec "$@" 2>>"$LOG"', "sh", *SERVER]
        env = {**os.environ, "FASTCOMPLETE_HOME": SERVER_HOME, "LOG": str(self.log)}
        client = await ClientServerConfig(server_command=command, server_env=env).start()
        await start(client, options)
        await wait_ready(client)
        return client

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = TIMEOUT) -> Any:
        """Run `coro` on the client's loop; no await may hang the test."""
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        return future.result(timeout + 5)

    def call(self, fn: Any, *args: Any) -> Any:
        """Call a (synchronous) client method, e.g. a notification, on the client's loop."""

        async def go() -> Any:
            return fn(*args)

        return self.run(go())

    async def command(self, name: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(args))
        )

    def outcome(self, coro: Coroutine[Any, Any, Any]) -> tuple[Any, JsonRpcException | None]:
        """(result, None) or (None, the JSON-RPC error): anything else (a hang) fails the test."""
        try:
            return self.run(coro), None
        except JsonRpcException as exc:
            return None, exc

    # -- the document as the server holds it --------------------------------------------------

    def line_count(self, uri: str) -> int:
        """The line count the server's request path sees, read through a refused request."""
        pos = {"line": FAR, "character": 0}
        _, error = self.outcome(
            self.command("fastcomplete.explain", {"uri": uri, "range": {"start": pos, "end": pos}})
        )
        match = re.search(r"past the end of the document \((\d+) lines\)", str(error))
        assert match, f"line {FAR} was not refused as past the end: {error}"
        return int(match[1])

    def text(self, uri: str) -> str:
        return self.run(self.command(DEBUG_COMMAND, {"uri": uri}))["text"]

    def assert_document(self, uri: str, text: str) -> None:
        """The server holds `text` for `uri`: exactly (with the debug hook), and in line count."""
        if self.has_debug_hook:
            assert self.text(uri) == text, f"{uri}: the server's text differs from the reference"
        assert self.line_count(uri) == len(lsp_lines(text)), f"{uri}: line count"

    # -- editing ---------------------------------------------------------------------------------

    def open(self, uri: str, text: str, language: str = "plaintext", version: int = 1) -> None:
        item = types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        self.call(
            self.client.text_document_did_open,
            types.DidOpenTextDocumentParams(text_document=item),
        )

    def change(
        self, uri: str, version: int, changes: list[types.TextDocumentContentChangeEvent]
    ) -> None:
        self.call(
            self.client.text_document_did_change,
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=changes,
            ),
        )

    def close(self, uri: str) -> None:
        self.call(
            self.client.text_document_did_close,
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)),
        )

    def inline(self, uri: str, line: int, character: int) -> Coroutine[Any, Any, Any]:
        return self.client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line, character),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Invoked
                ),
            )
        )

    def alive(self) -> dict[str, Any]:
        stats = self.run(self.command("fastcomplete.stats"))
        process = self.client._server
        assert process is not None and process.returncode is None
        return stats

    def stop(self) -> None:
        process = self.client._server
        try:
            self.run(self.client.shutdown_session(), timeout=20)
        finally:
            if process is not None and process.returncode is None:
                self.call(process.kill)  # it did not exit on shutdown/exit in time
                self.run(process.wait(), timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture(scope="module")
def harness(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    log = tmp_path_factory.mktemp("fuzz") / "server.log"
    h = Harness(model_options(root=tiny_model, **OPTIONS), log)
    yield h
    h.stop()


def edit(rng: tuple[int, int, int, int], text: str) -> types.TextDocumentContentChangePartial:
    start, end = types.Position(rng[0], rng[1]), types.Position(rng[2], rng[3])
    return types.TextDocumentContentChangePartial(range=types.Range(start, end), text=text)


# --------------------------------------------------------------------------------------------
# 1. The state machine
# --------------------------------------------------------------------------------------------

ALPHABET = st.one_of(
    st.sampled_from(list("ab xyz_(){}:=#\t\n\n\r\n")),
    st.sampled_from(["\r\n", "\r", "é", "ß", "€", "中", "𝔘", "👋", "🙂", "\u200d", "\ufeff"]),
    st.sampled_from(list(NOT_EOL_BREAKS)),
    st.characters(codec="utf-8"),
)
TEXT = st.lists(ALPHABET, max_size=40).map("".join)
SMALL_TEXT = st.lists(ALPHABET, max_size=8).map("".join)
# Up to ~200 KB: a random piece repeated (hypothesis cannot draw that much text itself). At least
# 30 characters a piece keeps big documents to tens of thousands of lines (the time budget, on
# both sides, goes by lines); a piece without a line break makes one enormous line.
PIECE = st.builds("{}{}{}".format, TEXT, st.just("x" * 30), st.sampled_from(["\n", "\r\n", ""]))
HUGE_TEXT = st.builds(lambda piece, n: (piece * n)[:200_000], PIECE, st.integers(1000, 60_000))
LANGUAGES = st.sampled_from(["plaintext", "plaintext", "markdown", "python"])
LARGE_LANGUAGES = st.sampled_from(["plaintext", "markdown"])
URI_NAMES = ["a.txt", "dir/b.py", "deep/er/c.md", "ünï/cödé.txt", "emoji👋.py", "my%20dir/d.txt"]

COUNTS = {"steps": 0, "examples": 0}  # over the whole run


class LspFuzz(RuleBasedStateMachine):
    harness: Harness  # set by the test: one server for all examples

    def __init__(self) -> None:
        super().__init__()
        self.docs: dict[str, dict[str, Any]] = {}  # uri -> {text, version, language}
        self.touched: str | None = None  # the document the last step changed
        self.serial = 0
        self.had_large = False

    # -- helpers --------------------------------------------------------------------------------

    def pick(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.docs)), label="uri")

    def position(self, data: st.DataObject, text: str) -> tuple[int, int]:
        """A position in `text`: at a line's start or end, anywhere on it (surrogate pairs
        included), past the end of a line or of the document, or arbitrary numbers."""
        spans = lsp_lines(text)
        kinds = ["start", "end", "any", "doc_end", "past_line", "past_line_by_one", "random"]
        kind = data.draw(st.sampled_from(kinds), label="position kind")
        if kind == "doc_end":
            lines = [len(spans) - 1, len(spans), len(spans) + 1, FAR]
            return data.draw(st.sampled_from(lines), label="line"), 0
        line = data.draw(st.integers(0, len(spans) - 1), label="line")
        start, end = spans[line]
        units = utf16_len(text[start:end])
        if kind == "start":
            return line, 0
        if kind == "end":
            return line, units
        if kind == "any":
            return line, data.draw(st.integers(0, units), label="character")
        if kind == "past_line":
            return line, data.draw(st.integers(units + 1, units + 5) | st.just(FAR))
        if kind == "past_line_by_one":
            return line, units + 1
        return data.draw(st.integers(0, len(spans))), data.draw(st.integers(0, units + 3))

    def range_in(self, data: st.DataObject, text: str) -> tuple[int, int, int, int]:
        a = self.position(data, text)
        if data.draw(st.booleans(), label="empty range"):
            return (*a, *a)
        b = self.position(data, text)
        (sl, sc), (el, ec) = sorted([a, b])
        return sl, sc, el, ec

    def send_changes(self, uri: str, changes: list[types.TextDocumentContentChangeEvent]) -> None:
        doc = self.docs[uri]
        for change in changes:
            doc["text"] = apply_change(doc["text"], change)
        doc["version"] += 1
        self.harness.change(uri, doc["version"], changes)
        self.touched = uri
        COUNTS["steps"] += 1

    def open(self, name: str, text: str, language: str) -> None:
        self.serial += 1
        uri = f"file:///fuzz/{id(self):x}/{self.serial}/{name}"
        self.docs[uri] = {"text": text, "version": 1, "language": language}
        self.harness.open(uri, text, language)
        self.touched = uri
        COUNTS["steps"] += 1

    # -- rules ----------------------------------------------------------------------------------

    @initialize()
    def begin(self) -> None:
        self.harness.alive()
        COUNTS["examples"] += 1

    @precondition(lambda self: len(self.docs) < MAX_DOCS)
    @rule(
        name=st.sampled_from(URI_NAMES),
        text=st.one_of(st.just(""), TEXT, TEXT.map(lambda t: t.replace("\n", "\r\n"))),
        language=LANGUAGES,
    )
    def open_document(self, name: str, text: str, language: str) -> None:
        self.open(name, text, language)

    @precondition(lambda self: len(self.docs) < MAX_DOCS and not self.had_large)
    @rule(piece=PIECE, size=st.integers(LARGE - 1000, LARGE + 100_000), language=LARGE_LANGUAGES)
    def open_large_document(self, piece: str, size: int, language: str) -> None:
        """Around the server's large-document threshold (1 MiB: completions then look at the text
        around the cursor only). One per example, not parsed as code: the time budget."""
        self.had_large = True
        self.open("large.txt", (piece * (size // len(piece) + 1))[:size], language)

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def close_document(self, data: st.DataObject) -> None:
        uri = self.pick(data)
        del self.docs[uri]
        self.harness.close(uri)
        if self.touched == uri:
            self.touched = None
        COUNTS["steps"] += 1
        # A closed document is unknown to requests again.
        _, error = self.harness.outcome(self.harness.inline(uri, 0, 0))
        assert error is not None and "unknown document" in str(error)

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), text=st.one_of(SMALL_TEXT, TEXT))
    def edit_range(self, data: st.DataObject, text: str) -> None:
        uri = self.pick(data)
        self.send_changes(uri, [edit(self.range_in(data, self.docs[uri]["text"]), text)])

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), count=st.integers(2, 4))
    def several_changes_at_once(self, data: st.DataObject, count: int) -> None:
        """One didChange with several changes: each applies to the text the previous one left."""
        uri = self.pick(data)
        text, changes = self.docs[uri]["text"], []
        for _ in range(count):
            change = edit(self.range_in(data, text), data.draw(SMALL_TEXT, label="text"))
            text = apply_change(text, change)
            changes.append(change)
        self.send_changes(uri, changes)

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def edit_at_surrogate_pair(self, data: st.DataObject) -> None:
        """An edit with one end inside a surrogate pair (invalid per the spec: read as after it)."""
        uri = self.pick(data)
        text = self.docs[uri]["text"]
        pairs = [m.start() for m in ASTRAL.finditer(text)]
        if not pairs:
            self.send_changes(uri, [edit((0, 0, 0, 0), data.draw(st.sampled_from(["👋", "x𝔘"])))])
            return
        offset = pairs[data.draw(st.integers(0, len(pairs) - 1), label="pair")]
        spans = lsp_lines(text)
        line = bisect.bisect_right([start for start, _ in spans], offset) - 1
        inside = (line, utf16_len(text[spans[line][0] : offset]) + 1)
        other = self.position(data, text)
        (sl, sc), (el, ec) = sorted([inside, other])
        self.send_changes(uri, [edit((sl, sc, el, ec), data.draw(SMALL_TEXT, label="text"))])

    @precondition(lambda self: any(len(d["text"]) < MAX_DOC for d in self.docs.values()))
    @rule(data=st.data(), text=HUGE_TEXT)
    def huge_insert(self, data: st.DataObject, text: str) -> None:
        small = sorted(u for u, d in self.docs.items() if len(d["text"]) < MAX_DOC)
        uri = data.draw(st.sampled_from(small), label="uri")
        self.send_changes(uri, [edit(self.range_in(data, self.docs[uri]["text"]), text)])

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), far=st.booleans())
    def delete_everything(self, data: st.DataObject, far: bool) -> None:
        uri = self.pick(data)
        text = self.docs[uri]["text"]
        spans = lsp_lines(text)
        end = (FAR, FAR) if far else (len(spans) - 1, utf16_len(text[spans[-1][0] :]))
        self.send_changes(uri, [edit((0, 0, *end), "")])

    @precondition(lambda self: self.docs)
    @rule(data=st.data(), text=st.one_of(st.just(""), TEXT))
    def replace_whole_document(self, data: st.DataObject, text: str) -> None:
        uri = self.pick(data)
        self.send_changes(uri, [types.TextDocumentContentChangeWholeDocument(text=text)])

    @precondition(lambda self: self.docs)
    @rule(data=st.data())
    def inline_completion(self, data: st.DataObject) -> None:
        uri = self.pick(data)
        text = self.docs[uri]["text"]
        line, character = self.position(data, text)
        result, error = self.harness.outcome(self.harness.inline(uri, line, character))
        COUNTS["steps"] += 1
        if "\x00" in text:  # the server refuses binary documents before reading the position
            assert error is not None or not result.items, (error, result)
            assert error is None or error.code == -32602, error
        elif line < len(lsp_lines(text)):
            assert error is None, f"({line}, {character}) is inside the document: {error}"
            assert isinstance(result, types.InlineCompletionList)
            for item in result.items:
                assert item.range.start == item.range.end, item.range
                start = (item.range.start.line, item.range.start.character)
                assert start in anchors(text, line, character), item.range
        else:
            assert error is not None, f"line {line} is past the end of the document"
            assert error.code == -32602, error
            assert "past the end of the document" in str(error), error

    @rule()
    def stats(self) -> None:
        stats = self.harness.run(self.harness.command("fastcomplete.stats"))
        assert stats["fastMode"] is self.harness.fast_mode and stats["modelsReady"] is True
        COUNTS["steps"] += 1

    @rule()
    def toggle_fast_mode(self) -> None:
        result = self.harness.run(self.harness.command("fastcomplete.toggleFastMode"))
        self.harness.fast_mode = not self.harness.fast_mode
        assert result == {"fastMode": self.harness.fast_mode}
        COUNTS["steps"] += 1

    # -- the invariant and cleanup ---------------------------------------------------------------

    @invariant()
    def server_holds_the_reference_text(self) -> None:
        if self.touched is not None and self.touched in self.docs:
            self.harness.assert_document(self.touched, self.docs[self.touched]["text"])
        self.touched = None

    def teardown(self) -> None:
        for uri, doc in self.docs.items():
            if self.harness.has_debug_hook:
                assert self.harness.text(uri) == doc["text"], uri
            self.harness.close(uri)
        self.docs.clear()


def test_fuzz_documents_and_requests(harness: Harness, capsys: pytest.CaptureFixture) -> None:
    """Thousands of random steps on one server: its documents always match the reference."""
    LspFuzz.harness = harness
    COUNTS.update(steps=0, examples=0)
    started = time.monotonic()
    run_state_machine_as_test(
        LspFuzz,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    elapsed = time.monotonic() - started
    stats = harness.alive()  # zero crashes: the same process still answers
    exact = "on" if harness.has_debug_hook else f"off (the server has no {DEBUG_COMMAND})"
    with capsys.disabled():
        print(
            f"\n[fuzz] {COUNTS['steps']} steps in {COUNTS['examples']} examples, {elapsed:.1f} s;"
            f" exact text check {exact}; server counts {stats['server']}"
        )
    if (EXAMPLES, STEPS) == (DEFAULT_EXAMPLES, DEFAULT_STEPS):
        assert COUNTS["steps"] >= 2000


# --------------------------------------------------------------------------------------------
# Found by fuzzing: regression tests
# --------------------------------------------------------------------------------------------


def check_edit(h: Harness, name: str, text: str, rng: tuple[int, int, int, int], new: str) -> None:
    uri = f"file:///bugs/{name}"
    h.open(uri, text)
    h.change(uri, 2, [edit(rng, new)])
    try:
        h.assert_document(uri, apply_change(text, edit(rng, new)))
    finally:
        h.close(uri)


def test_character_one_past_line_end_stays_on_its_line(harness: Harness) -> None:
    """Fixed by lsp_server/text/edits.py: "abc\ndef", insert "X" at (0, 4) is (0, 3) by the spec,
    "abcX\ndef"; pygls's TextDocument made "abc\nXdef" (its PositionCodec counts the "\n")."""
    check_edit(harness, "one-past.txt", "abc\ndef", (0, 4, 0, 4), "X")


def test_character_past_crlf_line_end_keeps_the_crlf(harness: Harness) -> None:
    """Fixed by lsp_server/text/edits.py: "abc\r\ndef", insert "X" at (0, 4) gives "abcX\r\ndef";
    pygls made "abc\rX\ndef"."""
    check_edit(harness, "crlf.txt", "abc\r\ndef", (0, 4, 0, 4), "X")


def test_character_past_last_line_end_means_its_end(harness: Harness) -> None:
    """Fixed by lsp_server/text/edits.py: "abc", insert "\n" at (0, 10) gives "abc\n"; pygls made
    "ab\nc" (it clamped to len(line) - 1, to skip a line break the last line does not have)."""
    check_edit(harness, "last-line.txt", "abc", (0, 10, 0, 10), "\n")


def test_form_feed_and_unicode_separators_do_not_end_lines(harness: Harness) -> None:
    """Fixed by lsp_server/text/edits.py: LSP lines end only at \r\n, \n, \r. pygls split lines
    with str.splitlines(), so a form feed (PEP 8 allows them in Python sources) shifted every later
    line by one: "a\x0cb\nc" + "X" at (1, 0) gives "a\x0cb\nXc"; pygls made "a\x0cXb\nc"."""
    check_edit(harness, "formfeed.py", "a\x0cb\nc", (1, 0, 1, 0), "X")
    check_edit(harness, "u2028.txt", "a\u2028b\nc", (1, 0, 1, 0), "X")


def test_large_document_past_the_end_is_invalid_params(harness: Harness) -> None:
    """Fixed in 247a096: in a document over 1 MiB (TREE_MAX_CHARS) around_cursor() indexed past
    its line list, so a request two or more lines past the end failed with -32603 "IndexError:
    list index out of range" instead of -32602, and one line past the end named the excerpt's
    numbers ("line 87383 is past the end of the document (87383 lines)" for line 200001)."""
    uri = "file:///bugs/large.txt"
    harness.open(uri, "x = 1\n" * 200_000)
    try:
        for line in (200_001, 200_002, FAR):
            _, error = harness.outcome(harness.inline(uri, line, 0))
            assert error is not None and error.code == -32602, (line, error)
            assert f"line {line} is past the end of the document (200001 lines)" in str(error)
    finally:
        harness.close(uri)


def test_large_document_with_cr_line_endings_completes(harness: Harness) -> None:
    """Fixed in 247a096: around_cursor() (documents over 1 MiB) split lines at "\\n" only, so in
    "x = 1\\r" * 200_000 every request below line 1 failed with -32603 "IndexError", and with
    mixed line endings it could cut around the wrong line."""
    uri = "file:///bugs/large-cr.txt"
    harness.open(uri, "x = 1\r" * 200_000)
    try:
        for line in (5, 100_000, 199_999):
            result, error = harness.outcome(harness.inline(uri, line, 3))
            assert error is None, (line, error)
            assert all(item.range.start == types.Position(line, 3) for item in result.items)
    finally:
        harness.close(uri)


def test_long_lines_stay_within_the_context_budget(tiny_model: Path, tmp_path: Path) -> None:
    """Fixed in 247a096: the prompt budget was applied in whole lines, so with contextTokens 256 a
    completion at the end of one 30 000-character line prompted ~6 000 tokens. With a 200 KB line
    (minified code, a data blob) the idle warm-up prefilled until the KV cache was full: minutes
    of CPU, gigabytes of memory, and no exit on shutdown/exit until it was done."""
    h = Harness(model_options(root=tiny_model, **OPTIONS), tmp_path / "log")
    try:
        text = "word " * 6000
        h.open("file:///bugs/one-long-line.txt", text)
        _, error = h.outcome(h.inline("file:///bugs/one-long-line.txt", 0, len(text)))
        assert error is None, error
        used = sum(m["prompt_tokens"] for m in h.alive()["models"].values())
        assert 0 < used <= 2 * 256, f"{used} prompt tokens for a budget of 256"
    finally:
        h.stop()


def test_lone_cr_ends_a_line_for_requests(harness: Harness) -> None:
    """Fixed in 306cbec: positions.py split lines at "\\n" only, so (1, 1) in "a\\rb" was refused
    as "line 1 is past the end of the document (1 lines)"."""
    uri = "file:///bugs/lone-cr.txt"
    harness.open(uri, "a\rb")
    try:
        result, error = harness.outcome(harness.inline(uri, 1, 1))
        assert error is None, error
        assert all(item.range.start == types.Position(1, 1) for item in result.items)
        assert harness.line_count(uri) == 2
    finally:
        harness.close(uri)


def test_percent_encoded_uri_is_a_known_document(harness: Harness) -> None:
    """Fixed in 306cbec: pygls files documents under unquote(uri), the server looked them up by the
    raw URI, so every request on "file:///home/me/my%20project/a.py" (or VS Code's
    "file:///c%3A/...") failed with "unknown document"."""
    uri = "file:///bugs/my%20project/a.py"
    harness.open(uri, "x = 1\n", "python")
    try:
        _, error = harness.outcome(harness.inline(uri, 1, 0))
        assert error is None, error
        harness.assert_document(uri, "x = 1\n")
    finally:
        harness.close(uri)


def test_empty_prompts_do_not_trip_the_circuit_breakers(tiny_model: Path, tmp_path: Path) -> None:
    """Fixed in 306cbec: a completion at the start of an empty plaintext file has an empty prompt;
    generate raised ValueError("empty prompt: nothing to continue from"), the router counted it
    as a failure of each model, the user was shown "no model could complete", and three such
    requests opened both breakers: no completions anywhere for 30 s."""
    h = Harness(model_options(root=tiny_model, **OPTIONS), tmp_path / "log")
    try:
        uri = "file:///bugs/empty.txt"
        h.open(uri, "")
        for _ in range(3):
            result, error = h.outcome(h.inline(uri, 0, 0))
            assert error is None and result.items == ()
        stats = h.alive()
        shown = [m.message for m in h.client.messages if "no model could complete" in m.message]
        assert stats["breakers"] == {"fast": "closed", "standard": "closed"}, (stats, shown)
        assert not shown, shown
    finally:
        h.stop()


# --------------------------------------------------------------------------------------------
# 2. Malformed JSON-RPC over raw stdio
# --------------------------------------------------------------------------------------------


class RawServer:
    """`fastcomplete serve` spoken to byte by byte, with a framed reader that never blocks."""

    def __init__(self, log: Path, options: dict[str, Any] | None = None) -> None:
        self.stderr = log.open("wb")
        self.proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "FASTCOMPLETE_HOME": SERVER_HOME},
        )
        os.set_blocking(self.proc.stdin.fileno(), False)
        self.buffer = b""
        self.ids = iter(range(1, 10**9))
        self.notifications: list[dict[str, Any]] = []
        self.stray: list[dict[str, Any]] = []  # responses nobody waited for
        self.graceful = True  # whether close() does the shutdown/exit handshake
        init = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": None,
                "capabilities": {
                    "window": {"workDoneProgress": True},
                    "workspace": {"configuration": True},
                },
                "initializationOptions": options or {},
            },
        )
        assert "result" in init, init
        self.notify("initialized", {})

    # -- writing --------------------------------------------------------------------------------

    def send_bytes(self, data: bytes, timeout: float = 60.0) -> None:
        """Write everything, reading meanwhile so that neither side's pipe can fill and block."""
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            assert left > 0, "the server stopped reading its input"
            readable, writable, _ = select.select([self.proc.stdout], [self.proc.stdin], [], left)
            if readable:
                self._read_some()
            if writable:
                with contextlib.suppress(BlockingIOError):
                    view = view[os.write(self.proc.stdin.fileno(), view[: 1 << 16]) :]

    def frame(self, body: bytes, header: bytes | None = None) -> None:
        """`body` with a correct Content-Length header, or with `header` instead."""
        head = b"Content-Length: %d\r\n" % len(body) if header is None else header
        self.send_bytes(head + b"\r\n" + body)

    def send(self, message: dict[str, Any]) -> None:
        self.frame(json.dumps(message).encode())

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        response = self.response(msg_id, timeout)
        assert response is not None, f"no response to {method} (id {msg_id}) in {timeout} s"
        return response

    def stats(self) -> dict[str, Any]:
        response = self.request("workspace/executeCommand", STATS_PARAMS)
        assert "result" in response, response
        return response["result"]

    # -- reading --------------------------------------------------------------------------------

    def _read_some(self) -> None:
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            raise AssertionError(f"the server closed its output (exit code {self.proc.poll()})")
        self.buffer += chunk

    def _next_frame(self) -> dict[str, Any] | None:
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return None
        fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        length = int(fields[b"Content-Length"])
        if len(rest) < length:
            return None
        self.buffer = rest[length:]
        return json.loads(rest[:length])

    def message(self, timeout: float) -> dict[str, Any] | None:
        """The next response from the server (None after `timeout`); notifications are kept
        aside and requests from the server answered on the way, so that it never blocks."""
        deadline = time.monotonic() + timeout
        while True:
            while (msg := self._next_frame()) is not None:
                if "method" not in msg:
                    return msg
                if "id" in msg:  # window/workDoneProgress/create, workspace/configuration, ...
                    result = None
                    if msg["method"] == "workspace/configuration":
                        result = [None for _ in msg["params"]["items"]]
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                else:  # window/logMessage, window/showMessage, $/progress, ...
                    self.notifications.append(msg)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if select.select([self.proc.stdout], [], [], left)[0]:
                self._read_some()

    def response(self, msg_id: Any, timeout: float = TIMEOUT) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while (msg := self.message(max(0.0, deadline - time.monotonic()))) is not None:
            if msg.get("id") == msg_id:
                return msg
            self.stray.append(msg)
        return None

    def answers_to(self, body: bytes) -> list[dict[str, Any]]:
        """The responses the server sends for the frame `body`. The server reads messages in
        order and answers a malformed one (if at all) while it handles it, so they all arrive
        before the answer to a request sent right after it (a short grace period on top)."""
        self.frame(body)
        seen = len(self.stray)
        self.stats()
        while (msg := self.message(timeout=0.2)) is not None:
            self.stray.append(msg)
        return self.stray[seen:]

    def close(self) -> None:
        try:
            if not self.graceful:
                raise OSError("no shutdown handshake")
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(10)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        finally:
            self.stderr.close()


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawServer]:
    """A server without models (requests that need none answer the same)."""
    server = RawServer(tmp_path / "server.log")
    yield server
    server.close()


@pytest.fixture(scope="module")
def shared_raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    """One such server for the tests that leave its input stream in order."""
    server = RawServer(tmp_path_factory.mktemp("raw") / "server.log")
    yield server
    server.close()


def request_bytes(msg_id: Any, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


def did_open(uri: str, text: str, language: str = "plaintext") -> dict[str, Any]:
    return {"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}


def inline_params(uri: str, line: int, character: int) -> dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }


STATS_PARAMS = {"command": "fastcomplete.stats", "arguments": []}
BAD_POSITION = {**inline_params("file:///raw/a.txt", 0, 0), "position": "line 1, character 2"}


def test_malformed_messages_leave_the_server_answering(tmp_path: Path, tiny_model: Path) -> None:
    server = RawServer(tmp_path / "server.log", model_options(root=tiny_model, **OPTIONS))

    def still_answers(case: str) -> None:
        assert server.proc.poll() is None, f"{case}: the server exited"
        try:
            server.stats()
        except AssertionError as exc:
            raise AssertionError(f"after {case}: {exc}") from exc

    try:
        for _ in range(300):
            stats = server.stats()
            if stats["modelsReady"] and len(stats.get("kv_cache_bytes", {})) == 2:
                break
            time.sleep(0.1)
        server.notify("textDocument/didOpen", did_open("file:///raw/a.txt", "hello wörld 👋\n"))

        # Each of these gets its JSON-RPC error or, as a notification, none (the tests below
        # check which), and none may stop the server from answering the next request.
        bodies = {
            "invalid JSON": b'{"jsonrpc": "2.0", "id": 900, "method": ',
            "invalid UTF-8": b'{"jsonrpc": "2.0", "id": 901, "method": "\xff\xfe"}',
            "a JSON array": b"[1, 2, 3]",
            "a JSON number": b"42",
            "an empty object": b"{}",
            "no jsonrpc member": b'{"id": 902, "method": "workspace/executeCommand"}',
            "position as a string": request_bytes(
                903, "textDocument/inlineCompletion", BAD_POSITION
            ),
            "negative position": request_bytes(
                904, "textDocument/inlineCompletion", inline_params("file:///raw/a.txt", -1, 0)
            ),
            "params as an array": request_bytes(905, "workspace/executeCommand", [1, 2]),
            "unknown notification": b'{"jsonrpc": "2.0", "method": "fuzz/unknown", "params": {}}',
            "unknown $/ notification": b'{"jsonrpc": "2.0", "method": "$/fuzz", "params": {}}',
            "request without id": json.dumps(
                {"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": STATS_PARAMS}
            ).encode(),
            "response to nothing": b'{"jsonrpc": "2.0", "id": 999999, "result": null}',
            "cancel of nothing": (
                b'{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 424242}}'
            ),
        }
        for case, body in bodies.items():
            server.frame(body)
            still_answers(case)

        # Requests with ids that get the right JSON-RPC error.
        answered = [
            ("fuzz/unknownMethod", {}, -32601),
            (
                "textDocument/inlineCompletion",
                inline_params("file:///raw/nowhere.txt", 0, 0),
                -32602,
            ),
            ("textDocument/inlineCompletion", inline_params("file:///raw/a.txt", 5, 0), -32602),
            ("workspace/executeCommand", {"command": "fastcomplete.noSuchCommand"}, -32602),
            (
                "workspace/executeCommand",
                {"command": "fastcomplete.explain", "arguments": "x"},
                -32602,
            ),
        ]
        for method, params, code in answered:
            response = server.request(method, params)
            assert response.get("error", {}).get("code") == code, (method, params, response)
            still_answers(method)
        # Past the end of a line (clamped to it) and inside the emoji's surrogate pair (read as
        # after it): completions, not errors.
        for character in (99, 13):
            response = server.request(
                "textDocument/inlineCompletion", inline_params("file:///raw/a.txt", 0, character)
            )
            assert "result" in response, response

        # A lone surrogate (a valid JSON escape, not valid Unicode) is read as U+FFFD, one UTF-16
        # unit for one: completions work (they failed with -32603 UnicodeEncodeError before).
        server.frame(
            b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": '
            b'{"uri": "file:///raw/s.py", "languageId": "python", "version": 1, '
            b'"text": "x = \\"\\ud800\\"\\n"}}}'
        )
        response = server.request(
            "textDocument/inlineCompletion", inline_params("file:///raw/s.py", 1, 0)
        )
        assert "result" in response, response
        response = server.request(
            "workspace/executeCommand",
            {"command": DEBUG_COMMAND, "arguments": [{"uri": "file:///raw/s.py"}]},
        )
        assert response["result"]["text"] == 'x = "\ufffd"\n', response
        still_answers("a lone surrogate")

        # An extra (valid) header, and a frame split into 7-byte writes.
        body = request_bytes("typed", "workspace/executeCommand", STATS_PARAMS)
        content_type = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        server.frame(body, header=b"Content-Length: %d\r\n" % len(body) + content_type)
        assert "result" in server.response("typed")
        body = request_bytes("split", "workspace/executeCommand", STATS_PARAMS)
        frame = b"Content-Length: %d\r\n\r\n" % len(body) + body
        for i in range(0, len(frame), 7):
            server.send_bytes(frame[i : i + 7])
        assert "result" in server.response("split")

        # A 20 MB document (in lines: one 20 MB line is test_long_lines_stay_within_the_context_
        # budget): the server takes it, answers at once, and completes in it.
        started = time.monotonic()
        text = "hello = 'wörld' 👋\n" * (20_000_000 // 20)
        server.notify("textDocument/didOpen", did_open("file:///raw/huge.txt", text))
        still_answers("a 20 MB message")
        response = server.request(
            "textDocument/inlineCompletion",
            inline_params("file:///raw/huge.txt", 500_000, 8),
            timeout=60,
        )
        assert "result" in response, response
        server.notify("textDocument/didClose", {"textDocument": {"uri": "file:///raw/huge.txt"}})
        assert time.monotonic() - started < 60

        # Wrong Content-Length, last: the framing recovers at the next well-formed frame.
        # Shorter: the cut body is invalid JSON, its tail (ended by "\r\n") a junk header line.
        body = request_bytes(910, "workspace/executeCommand", STATS_PARAMS)
        server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(body) - 10) + body + b"\r\n")
        still_answers("a Content-Length 10 bytes short")
        # Longer: the body swallows the next frame whole, the frame after it is read again.
        body = request_bytes(911, "workspace/executeCommand", STATS_PARAMS)
        swallowed = request_bytes(912, "workspace/executeCommand", STATS_PARAMS)
        swallowed = b"Content-Length: %d\r\n\r\n" % len(swallowed) + swallowed
        length = len(body) + len(swallowed)
        server.send_bytes(b"Content-Length: %d\r\n\r\n" % length + body + swallowed)
        still_answers("a Content-Length that swallows the next frame")
        # Zero, and no Content-Length at all: skipped up to the next "\r\n".
        server.send_bytes(b"Content-Length: 0\r\n\r\n{}\r\n")
        still_answers("Content-Length: 0")
        server.send_bytes(b"Content-Type: application/json\r\n\r\n{}\r\n")
        still_answers("no Content-Length")

        # Nothing answered a notification, and no request was answered out of the blue.
        assert not [m for m in server.stray if "result" in m], server.stray
        assert server.proc.poll() is None
    finally:
        server.close()
    assert server.proc.returncode == 0, "the server did not exit cleanly on shutdown/exit"
    # Each refusal is one log line; pygls logged a traceback for every one.
    log = (tmp_path / "server.log").read_text()
    assert "refused a message" in log and "Traceback" not in log


def codes(answers: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(a.get("id"), a.get("error", {}).get("code")) for a in answers]


def test_parse_error_gets_a_parse_error_response(shared_raw: RawServer) -> None:
    """JSON-RPC 2.0 section 5.1: invalid JSON -> {"id": null, "error": {"code": -32700, ...}}.
    pygls only logged "Unable to handle message" and showed "Error in server: Expecting value";
    lsp_server/protocol/jsonrpc.py parses before pygls sees a message."""
    for body in [b'{"jsonrpc": "2.0", "id": 7, "method": ', b'{"id": 7, "method": "\xff"}']:
        assert codes(shared_raw.answers_to(body)) == [(None, -32700)], body


def test_invalid_request_gets_an_invalid_request_response(shared_raw: RawServer) -> None:
    """Each gets -32600, with its id when it has a usable one. pygls dropped them
    (AttributeError: 'int' object has no attribute 'jsonrpc'; a wrong version was ignored with a
    log line; an object id got -32603), so a client waiting for id 8 or 9 waited for ever."""
    for body, msg_id in [
        (b"42", None),
        (b"[]", None),
        (b'{"id": 8, "method": "workspace/executeCommand", "params": {}}', 8),
        (b'{"jsonrpc": "1.0", "id": 9, "method": "workspace/executeCommand", "params": {}}', 9),
        (b'{"jsonrpc": "2.0", "id": {"n": 10}, "method": "workspace/executeCommand"}', None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "shutdown"}', None),
        (b'{"jsonrpc": "2.0", "id": 11, "method": 5}', 11),
        (b'{"jsonrpc": "2.0", "id": 12}', 12),
        (request_bytes(13, "textDocument/didClose", {"textDocument": {"uri": "file:///x"}}), 13),
    ]:
        assert codes(shared_raw.answers_to(body)) == [(msg_id, -32600)], body


def test_invalid_params_get_an_invalid_params_response(shared_raw: RawServer) -> None:
    """pygls structured the params while decoding the JSON (json.loads object_hook): the
    ClassValidationError became JsonRpcInvalidParams *before* the id was known, so it was only
    logged and shown ("Error in server: Invalid Params") and the request hung in the client.
    Same for a negative line, and for executeCommand params given as an array."""
    negative = inline_params("file:///raw/a.txt", -1, 0)
    for body, msg_id in [
        (request_bytes(12, "textDocument/inlineCompletion", BAD_POSITION), 12),
        (request_bytes(13, "textDocument/inlineCompletion", negative), 13),
        (request_bytes(14, "workspace/executeCommand", [1, 2]), 14),
    ]:
        answers = shared_raw.answers_to(body)
        assert codes(answers) == [(msg_id, -32602)], (
            f"no response to id {msg_id}: a real client would wait for it forever"
        )
    # The error says which field is wrong.
    assert "$.params.position" in answers[0]["error"]["message"] or msg_id == 14


def test_a_lowercase_header_does_not_desynchronise_the_stream(raw: RawServer) -> None:
    """Header names are case-insensitive (LSP headers follow HTTP). pygls ignored
    "content-length: N", then read the body as a header line, which ran into the next frame's
    "Content-Length" line: from then on every body swallowed the next header and the server never
    answered again. lsp_server/protocol/jsonrpc.py reads headers case-insensitively."""
    body = request_bytes(20, "workspace/executeCommand", STATS_PARAMS)
    raw.frame(body, header=b"content-length:%d\r\n" % len(body))
    for msg_id in (21, 22, 23):
        raw.frame(request_bytes(msg_id, "workspace/executeCommand", STATS_PARAMS))
    for msg_id in (20, 21, 22, 23):
        response = raw.response(msg_id, timeout=10)
        assert response is not None and "result" in response, (msg_id, response)


def shown(server: RawServer) -> list[str]:
    """The messages shown to the user about bad messages (not those about missing models)."""
    messages = [str(m.get("params", {}).get("message")) for m in server.notifications]
    return [m for m in messages if "malformed" in m or "Error in server" in m]


def test_notifications_get_no_answer_and_a_malformed_one_is_reported(raw: RawServer) -> None:
    """A request sent without an id is a notification: nothing may answer it (pygls showed
    "Error in server: Invalid Params" for executeCommand). A malformed notification cannot be
    answered either, but losing an edit desynchronises the document: the user hears of it once."""
    stats = {"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": STATS_PARAMS}
    assert raw.answers_to(json.dumps(stats).encode()) == []
    assert shown(raw) == []
    raw.notify("textDocument/didOpen", did_open("file:///raw/n.txt", "abc\n"))
    bad_change = {
        "textDocument": {"uri": "file:///raw/n.txt", "version": 2},
        "contentChanges": [{"range": {"start": {"line": -1, "character": 0}}, "text": "x"}],
    }
    for _ in range(2):
        message = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": bad_change}
        assert raw.answers_to(json.dumps(message).encode()) == []
    assert shown(raw) == ["fastcomplete ignored a malformed textDocument/didChange notification"]


def test_requests_after_shutdown_are_refused(raw: RawServer) -> None:
    """LSP: "If a server receives requests after a shutdown request those requests should error
    with InvalidRequest" (pygls dropped them silently)."""
    assert raw.request("shutdown", None) == {"jsonrpc": "2.0", "id": 1 + 1, "result": None}
    response = raw.request("workspace/executeCommand", STATS_PARAMS)
    assert response["error"]["code"] == -32600, response
    raw.graceful = False
    raw.notify("exit", None)
    assert raw.proc.wait(10) == 0  # exit after shutdown: code 0


def test_exit_without_shutdown_exits_with_code_1(raw: RawServer) -> None:
    raw.graceful = False
    raw.notify("exit", None)
    assert raw.proc.wait(10) == 1  # the LSP's code for an exit without shutdown


def test_tcp_transport_reads_frames_the_same_way(tmp_path: Path) -> None:
    """`fastcomplete serve --tcp`: the same reader as stdio, so the same answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "server.log").open("wb")
    env = {**os.environ, "FASTCOMPLETE_HOME": SERVER_HOME}
    proc = subprocess.Popen([*SERVER, "--tcp", f"127.0.0.1:{port}"], stderr=log, env=env)
    try:
        for _ in range(300):
            with contextlib.suppress(ConnectionRefusedError):
                conn = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the server never listened")
        buffer = b""

        def answer(msg_id: Any) -> dict[str, Any]:
            nonlocal buffer
            while True:
                head, sep, rest = buffer.partition(b"\r\n\r\n")
                length = re.search(rb"Content-Length: (\d+)", head) if sep else None
                if length and len(rest) >= int(length.group(1)):
                    body, buffer = rest[: int(length.group(1))], rest[int(length.group(1)) :]
                    message = json.loads(body)
                    if "method" not in message and message.get("id") == msg_id:
                        return message
                    continue
                chunk = conn.recv(1 << 16)
                assert chunk, "the server closed the connection"
                buffer += chunk

        init = request_bytes(1, "initialize", {"processId": None, "capabilities": {}})
        conn.sendall(b"content-length: %d\r\n\r\n" % len(init) + init)
        assert "capabilities" in answer(1)["result"]
        conn.sendall(b'Content-Length: 5\r\n\r\n{"id"')
        assert answer(None)["error"]["code"] == -32700
        # A second editor is told to start its own server and closed: it never sees, or takes
        # over, the first editor's answers.
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as second:
            told = b""
            while chunk := second.recv(1 << 16):
                told += chunk
        assert b"another editor is already connected" in told and b"window/showMessage" in told
        stats = request_bytes(2, "workspace/executeCommand", STATS_PARAMS)
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(stats) + stats)
        assert "result" in answer(2)
        shutdown = request_bytes(3, "shutdown", None)
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(shutdown) + shutdown)
        assert answer(3)["result"] is None
        exit_ = b'{"jsonrpc": "2.0", "method": "exit"}'
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(exit_) + exit_)
        assert proc.wait(10) == 0
        conn.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        log.close()


def test_tcp_on_a_non_loopback_host_needs_a_flag(tmp_path: Path) -> None:
    env = {**os.environ, "FASTCOMPLETE_HOME": SERVER_HOME}
    refused = subprocess.run(
        [*SERVER, "--tcp", "0.0.0.0:0"], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 1
    assert "not a loopback address" in refused.stderr and "--allow-remote-host" in refused.stderr
