"""What an answer source is, and the values that move down the chain.

An answer source looks at one request (an `Attempt`) and either offers a suggestion (`Offer`),
ends the request with no answer and the reason why (`NoAnswer`), or passes (None) to the next
source. Sources do no bookkeeping: the counts they note on the attempt, the rejections, the show
gate and the memory are applied in one place (lsp_server.inline.showing) to whatever answered.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from inference.engine import EngineResult
from lsp_server.completion.plan import CompletionPlan
from lsp_server.completion.planner import View
from lsp_server.completion.run import Completion
from lsp_server.inline.answers import Origin
from lsp_server.inline.flights import Flight
from lsp_server.inline.memory import Match
from lsp_server.inline.prefill import Aim
from lsp_server.serving.scheduler import Ticket
from lsp_server.text.documents import Document, Snapshot
from lsp_server.text.positions import PositionError, offset_at


@dataclass(frozen=True)
class Ask:
    """One request, resolved: the document as it was asked in, and the text and cursor it is
    answered on (with the suggest widget's selected item in place, when there is one)."""

    uri: str  # as the client sent it
    doc: Document  # the live document: its version moves on with each edit
    version: int
    text: str
    line: int
    character: int  # UTF-16
    invoked: bool  # asked for explicitly: ranked alternatives, no memory, no debounce
    aim: Aim  # where the person is (before any selected item)
    where: str  # for the log
    inserted: tuple[int, str, int] | None = None  # the selected item: (start, text, end)
    remembered: Match | None = None  # a suggestion shown or prefetched that this cursor is in

    @property
    def offset(self) -> int | None:
        """The cursor in `text` (None when it is outside: the model path reports that)."""
        try:
            return offset_at(self.text, self.line, self.character)
        except PositionError:
            return None


@dataclass
class Attempt:
    """One request on its way down the chain: what earlier sources found, for later ones."""

    ask: Ask
    ticket: Ticket | None = None  # once the request waits its turn for the model
    snap: Snapshot | None = None  # the document it is answered on, once settled
    view: View | None = None  # what planning sees of it
    plan: CompletionPlan | None = None  # the plan the model ran
    done: Completion | None = None  # the model's last run
    flight: Flight | None = None  # its run in flight, which a newer request may take over
    counts: Counter = field(default_factory=Counter)  # noted by sources, added to the stats


@dataclass(frozen=True)
class Offer:
    """A suggestion a source would show at the cursor of `document`."""

    origin: Origin
    text: str  # what would be shown (for a suggestion typed through: its rest)
    result: EngineResult | None  # what made it (its tokens' log-probabilities)
    document: str  # the text it is shown in
    anchor: int  # where the suggestion starts in `document` (its place, for rejections)
    typed: int = 0  # characters of it typed through: it shows at anchor + typed
    alternatives: tuple[str, ...] = ()  # every item to offer, best first (an invoked request)
    completion: Completion | None = None  # the model's run, when a model made it now
    prefetch_after: bool = False  # worth computing the suggestion after it in idle time
    notice: str | None = None  # something the person should be told once

    @property
    def offset(self) -> int:
        return self.anchor + self.typed


@dataclass(frozen=True)
class NoAnswer:
    """The request ends without a suggestion: `reason` is what the stats' emptyReasons count;
    `counter`, the server count it adds to (the reason itself by default)."""

    reason: str
    counter: str | None = None
    notice: str | None = None  # something the person should be told once
    notice_level: str = "warning"


class AnswerSource(Protocol):
    async def attempt(self, attempt: Attempt) -> Offer | NoAnswer | None:
        """An offer, the end of the request, or None: the next source's turn."""
        ...
