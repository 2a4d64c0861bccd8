"""LSP positions are UTF-16 code units; Python strings index code points. Convert carefully."""

from __future__ import annotations

import re


class PositionError(ValueError):
    """A position outside the document."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_to_index(line: str, character: int) -> int:
    """Code-point index in `line` for a UTF-16 `character` offset.

    Inside a surrogate pair: after it. Past the end of the line: the end of the line, as the LSP
    spec says ("If the character value is greater than the line length it defaults back to the
    line length").
    """
    if character < 0:
        raise PositionError(f"negative character {character}")
    units = 0
    for index, ch in enumerate(line):
        if units >= character:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def index_to_utf16(line: str, index: int) -> int:
    return utf16_len(line[:index])


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the LSP's line endings, and only those


def offset_at(text: str, line: int, character: int) -> int:
    """Offset into `text` for an LSP (line, UTF-16 character) position.

    A line past the end of the document is an error (the request was made for another version).
    """
    if line < 0:
        raise PositionError(f"negative line {line}")
    start = 0
    for _ in range(line):
        found = LINE_BREAK.search(text, start)
        if found is None:
            count = len(LINE_BREAK.findall(text)) + 1
            raise PositionError(f"line {line} is past the end of the document ({count} lines)")
        start = found.end()
    end = LINE_BREAK.search(text, start)
    row = text[start : end.start() if end else len(text)]
    return start + utf16_to_index(row, character)


def clamp_character(text: str, line: int, character: int) -> int:
    """`character`, or the line's length in UTF-16 units when it points past the line's end."""
    start = offset_at(text, line, 0)
    end = LINE_BREAK.search(text, start)
    row = text[start : end.start() if end else len(text)]
    return min(character, utf16_len(row))
