"""The plain values an inline completion is asked with and answered by, and where an answer
came from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from inference.engine import EngineResult
from lsp_server.text.positions import offset_at


class Origin(Enum):
    """Where a suggestion came from: what the show gate, the counts and the memory are told."""

    MODEL = "model"  # the model on the whole prompt (or the engine's cache of it)
    SHORT = "short"  # the model on the nearest lines of a prompt too cold to prefill in time
    WHOLE_AFTER_SHORT = "whole_after_short"  # the short prompt gave nothing: the whole one
    TYPED_THROUGH = "type_through"  # the rest of a shown suggestion the person is typing
    SHOWN_AGAIN = "shown_again"  # a suggestion shown at exactly this place, asked for again
    PREFETCHED = "prefetch"  # computed ahead, as if the shown one were accepted
    IN_FLIGHT = "in_flight"  # an earlier key's answer, still being written, that agrees with
    # what was typed since: its rest


@dataclass(frozen=True)
class Answer:
    text: str
    result: EngineResult | None  # what made it; None for a source that runs no model
    line: int
    character: int  # where the item is anchored: a character past the line's end is its end
    alternatives: tuple[str, ...] = ()  # every item to offer, best first; () : just `text`

    @property
    def items(self) -> tuple[str, ...]:
        return self.alternatives or (self.text,)

    @property
    def model_id(self) -> str | None:
        return self.result.model_id if self.result is not None else None

    @property
    def variant(self) -> str:
        return self.result.variant if self.result is not None else "none"


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
