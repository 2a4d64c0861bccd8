"""The plain values an inline completion is asked with and answered by."""

from __future__ import annotations

from dataclasses import dataclass

from inference.engine import EngineResult
from lsp_server.text.positions import offset_at


@dataclass(frozen=True)
class Answer:
    text: str
    result: EngineResult
    line: int
    character: int  # where the item is anchored: a character past the line's end is its end
    alternatives: tuple[str, ...] = ()  # every item to offer, best first; () : just `text`

    @property
    def items(self) -> tuple[str, ...]:
        return self.alternatives or (self.text,)


@dataclass(frozen=True)
class Selected:
    """The item selected in the editor's suggest widget: `text` over the range from (line,
    character) to (end_line, end_character). A suggestion then continues after it, as if it
    were accepted (LSP's selectedCompletionInfo: the editor shows only items that extend it)."""

    line: int
    character: int
    end_line: int
    end_character: int
    text: str

    def span(self, text: str) -> tuple[int, int]:
        """Raises PositionError."""
        start = offset_at(text, self.line, self.character)
        end = offset_at(text, self.end_line, self.end_character)
        return min(start, end), max(start, end)
