"""lsp_server.text.edits and the line lookup behind it: LSP content changes, exactly."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types

from lsp_server.text import positions
from lsp_server.text.edits import apply_change
from lsp_server.text.positions import LINE_BREAK, PositionError, line_start, offset_at


def change(sl: int, sc: int, el: int, ec: int, text: str) -> types.TextDocumentContentChangePartial:
    rng = types.Range(types.Position(sl, sc), types.Position(el, ec))
    return types.TextDocumentContentChangePartial(range=rng, text=text)


@pytest.mark.parametrize(
    ("text", "edit", "expected"),
    [
        ("abc\ndef", change(0, 1, 0, 2, "X"), "aXc\ndef"),
        ("abc\ndef", change(0, 4, 0, 4, "X"), "abcX\ndef"),  # one past the end: the end
        ("abc\r\ndef", change(0, 4, 0, 4, "X"), "abcX\r\ndef"),  # not between \r and \n
        ("abc\rdef", change(1, 0, 1, 0, "X"), "abc\rXdef"),  # a lone CR ends a line
        ("abc", change(0, 10, 0, 10, "\n"), "abc\n"),
        ("abc", change(5, 0, 9, 9, "!"), "abc!"),  # past the last line: the end
        ("a\x0cb\nc", change(1, 0, 1, 0, "X"), "a\x0cb\nXc"),  # form feed ends no line
        ("a\u2028b\u0085\nc", change(1, 0, 1, 0, "X"), "a\u2028b\u0085\nXc"),
        ("x👋y", change(0, 2, 0, 2, "-"), "x👋-y"),  # inside a surrogate pair: after it
        ("x👋y", change(0, 1, 0, 3, ""), "xy"),
        ("ab\ncd", change(0, 1, 1, 1, ""), "ad"),
        ("ab\ncd", change(1, 1, 0, 1, "Z"), "aZd"),  # a reversed range: start and end swapped
        ("ab", types.TextDocumentContentChangeWholeDocument(text="new"), "new"),
    ],
)
def test_apply_change(text: str, edit: types.TextDocumentContentChangeEvent, expected: str) -> None:
    assert apply_change(text, edit) == expected


def all_line_starts(text: str) -> list[int]:
    return [0, *(found.end() for found in LINE_BREAK.finditer(text))]


def test_line_start_matches_every_line_break(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(positions, "_CHUNK", 5)  # many chunk boundaries in short texts
    rng = random.Random(7)
    pieces = ["a", "é", "👋", "\n", "\r\n", "\r", "\x0c", "\u2028"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        starts = all_line_starts(text)
        for line in range(12):
            expected = starts[line] if line < len(starts) else None
            assert line_start(text, line) == expected, (text, line)


def test_offset_at_past_the_end_names_the_document_length() -> None:
    with pytest.raises(PositionError, match=r"line 3 is past the end of the document \(2 lines\)"):
        offset_at("a\nb", 3, 0)
    with pytest.raises(PositionError, match="negative line"):
        offset_at("a", -1, 0)
