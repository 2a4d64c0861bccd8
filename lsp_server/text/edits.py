"""Incremental document changes applied exactly as the LSP says.

pygls's TextDocument splits lines with str.splitlines() (form feed and U+2028 end lines there, not
in the LSP) and clamps a character past a line's end to after its line break; both put edits in
the wrong place. Here lines end only at \\r\\n, \\r and \\n, a character past a line's end means
the line's end, and a line past the document's end means the document's end (all as
vscode-languageserver-textdocument, the LSP's reference implementation, reads them).
"""

from __future__ import annotations

from lsprotocol import types

from lsp_server.text.positions import line_at, utf16_to_index


def apply_change(text: str, change: types.TextDocumentContentChangeEvent) -> str:
    start, end = change_span(text, change)
    return "".join((text[:start], change.text, text[end:]))  # one copy, not two


def change_span(text: str, change: types.TextDocumentContentChangeEvent) -> tuple[int, int]:
    """The [start, end) character offsets in `text` that `change` replaces."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return 0, len(text)
    rng = change.range
    base, row = _line(text, rng.start.line)
    start = base + utf16_to_index(row, rng.start.character)
    if rng.end.line != rng.start.line:  # most keystrokes stay on one line: one lookup
        base, row = _line(text, rng.end.line)
    end = base + utf16_to_index(row, rng.end.character)
    return min(start, end), max(start, end)  # a reversed range, as vscode reads it


def _line(text: str, line: int) -> tuple[int, str]:
    """Where `line` starts and its text; past the end of the document, the end (never an error,
    as editors expect of edits)."""
    return line_at(text, line) or (len(text), "")
