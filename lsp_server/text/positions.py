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


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the LSP's line endings, and only those
_CHUNK = 1 << 16


def line_start(text: str, line: int) -> int | None:
    """Offset where `line` begins, or None past the end of the document.

    Called on every keystroke, also in 10 MB documents: without a lone "\r" every line ends at
    a "\n", so whole chunks are skipped with str.count in C instead of one line at a time.
    """
    if line < 0:
        raise PositionError(f"negative line {line}")
    if "\r" in text and text.count("\r") != text.count("\r\n"):  # a lone CR: the slow way
        start = 0
        for _ in range(line):
            found = LINE_BREAK.search(text, start)
            if found is None:
                return None
            start = found.end()
        return start
    start, left = 0, line
    while left:
        in_chunk = text.count("\n", start, start + _CHUNK)
        if in_chunk < left:
            if start + _CHUNK >= len(text):
                return None
            left -= in_chunk
            start += _CHUNK
            continue
        for _ in range(left):
            start = text.index("\n", start) + 1
        left = 0
    return start


def line_at(text: str, line: int) -> tuple[int, str] | None:
    """Where `line` starts and its text without the line break; None past the end."""
    start = line_start(text, line)
    if start is None:
        return None
    end = LINE_BREAK.search(text, start)
    return start, text[start : end.start() if end else len(text)]


def offset_at(text: str, line: int, character: int) -> int:
    """Offset into `text` for an LSP (line, UTF-16 character) position.

    A line past the end of the document is an error (the request was made for another version).
    """
    start, row = _existing_line(text, line)
    return start + utf16_to_index(row, character)


def clamp_character(text: str, line: int, character: int) -> int:
    """`character`, or the line's length in UTF-16 units when it points past the line's end."""
    return min(character, utf16_len(_existing_line(text, line)[1]))


def _existing_line(text: str, line: int) -> tuple[int, str]:
    found = line_at(text, line)
    if found is None:
        count = len(LINE_BREAK.findall(text)) + 1
        raise PositionError(f"line {line} is past the end of the document ({count} lines)")
    return found


def position_at(text: str, offset: int) -> tuple[int, int]:
    """The LSP (line, UTF-16 character) of a character offset: the inverse of `offset_at`."""
    breaks = list(LINE_BREAK.finditer(text, 0, offset))
    begin = breaks[-1].end() if breaks else 0
    return len(breaks), utf16_len(text[begin:offset])
