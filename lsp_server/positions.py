"""LSP positions are UTF-16 code units; Python strings index code points. Convert carefully."""

from __future__ import annotations


class PositionError(ValueError):
    """A position outside the document."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_to_index(line: str, character: int) -> int:
    """Code-point index in `line` for a UTF-16 `character` offset (inside a surrogate pair: after it)."""
    if character < 0:
        raise PositionError(f"negative character {character}")
    units = 0
    for index, ch in enumerate(line):
        if units >= character:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    if character > units:
        raise PositionError(f"character {character} is past the end of the line ({units} units)")
    return len(line)


def index_to_utf16(line: str, index: int) -> int:
    return utf16_len(line[:index])


def offset_at(text: str, line: int, character: int) -> int:
    """Offset into `text` for an LSP (line, UTF-16 character) position."""
    lines = text.split("\n")
    if line < 0 or line >= len(lines):
        raise PositionError(f"line {line} is past the end of the document ({len(lines)} lines)")
    start = sum(len(row) + 1 for row in lines[:line])
    row = lines[line].removesuffix("\r")
    return start + utf16_to_index(row, character)
