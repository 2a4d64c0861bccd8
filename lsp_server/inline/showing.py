"""Whatever answered, in one place: the rejections (a suggestion passed over here again and again
is held back), the show gate, the memory of what is shown (for type-through) and the counts.
Every request ends here once, with a suggestion or with the reason it got none."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from lsp_server.config.settings import Settings
from lsp_server.inline.answers import Answer, Origin
from lsp_server.inline.memory import Remembered, SuggestionMemory
from lsp_server.inline.rejections import Rejections, place_of
from lsp_server.inline.show_gate import Put, ShowGate, features, rest_logprobs
from lsp_server.inline.sources.base import Ask, NoAnswer, Offer
from lsp_server.serving.notices import Notices
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.positions import clamp_character

log = logging.getLogger(__name__)

SHOWN_COUNTS = {
    Origin.TYPED_THROUGH: "type_through",
    Origin.PREFETCHED: "prefetch_hits",
    Origin.SHOWN_AGAIN: "shown_again",
    Origin.IN_FLIGHT: "in_flight_hits",
}


class Showing:
    def __init__(
        self,
        settings: Callable[[], Settings],
        rejections: Rejections,
        show_gate: ShowGate,
        memory: SuggestionMemory,
        telemetry: Telemetry,
        notices: Notices,
    ) -> None:
        self._settings = settings
        self._rejections = rejections
        self._show_gate = show_gate
        self._memory = memory
        self._telemetry = telemetry
        self._notices = notices

    def asked(self, ask: Ask) -> None:
        """A new request: the gate learns what became of the last suggestions, and, unless the
        person is typing one through, one shown elsewhere was passed over."""
        if self._settings().showGate:
            self._show_gate.observe(ask.doc.uri, ask.doc.text)
        typing = ask.remembered is not None and ask.remembered.typed
        offset = ask.offset
        if not typing and offset is not None:
            self._rejections.asked(place_of(ask.doc.uri, ask.text, offset))

    def count(self, counts: Counter) -> None:
        for key, n in counts.items():
            self._telemetry.counts[key] += n

    def nothing(self, ask: Ask, end: NoAnswer) -> None:
        self._telemetry.counts[end.counter or end.reason] += 1
        self._telemetry.no_answer(end.reason, ask.where)
        if end.notice:
            self._notices.tell_once(end.notice, end.notice_level)

    def show(self, ask: Ask, offer: Offer) -> Answer | None:
        """The answer for `offer`, or None when it is held back here (passed over here
        `rejectAfterShows` times, or the show gate gives it too little chance)."""
        settings, uri = self._settings(), ask.doc.uri
        if offer.notice:
            self._notices.tell_once(offer.notice)
        if offer.origin is Origin.TYPED_THROUGH:
            self._rejections.taken(uri)  # typing it is taking it
        else:
            limit = 0 if ask.invoked else settings.rejectAfterShows  # asked for: answered
            place = place_of(uri, offer.document, offer.anchor)
            if not self._rejections.offer(place, offer.text, limit):
                self.nothing(ask, NoAnswer("rejected_here"))
                return None
        if not ask.invoked and self._held_back(ask, offer):
            return None
        if offer.completion is not None:  # made now: remembered for type-through
            before, after = offer.document[: offer.anchor], offer.document[offer.anchor :]
            self._memory.remember(
                uri, Remembered(before, after, offer.text, offer.origin, offer.result)
            )
        self._count_shown(offer)
        if settings.debug:
            log.info("completion %s -> %r (%s)", ask.where, offer.text, offer.origin.value)
        return Answer(
            offer.text,
            offer.result,
            ask.line,
            clamp_character(offer.document, ask.line, ask.character),
            offer.alternatives,
        )

    def _count_shown(self, offer: Offer) -> None:
        counts = self._telemetry.counts
        counts["answered"] += 1
        if offer.origin in SHOWN_COUNTS:
            counts[SHOWN_COUNTS[offer.origin]] += 1
        done = offer.completion
        if done is not None:
            counts["alternatives"] += max(0, len(done.alternatives) - 1)
            counts["reranked"] += done.reranked
            for step in done.trimmed_by:
                counts[f"trimmed.{step}"] += 1

    def _held_back(self, ask: Ask, offer: Offer) -> bool:
        """Whether the show gate holds `offer` back (it learns from it either way)."""
        settings = self._settings()
        if not settings.showGate:
            return False
        text, offset = offer.document, offer.offset
        line_start = text.rfind("\n", 0, offset) + 1
        line_end = text.find("\n", offset)
        logprobs = offer.result.logprobs if offer.result else ()
        # The whitespace a suggestion starts with (the newline and indentation that Enter types
        # anyway, as editors indent) says nothing about whether the person wants what follows.
        typed = offer.document[offer.anchor : offer.offset].lstrip()
        x = features(
            offer.text,
            rest_logprobs(logprobs, offer.typed, len(offer.text)),
            text[line_start:offset],
            text[offset : line_end if line_end >= 0 else len(text)],
            ask.doc.language_id,
            offer.origin is Origin.PREFETCHED,
            len(typed),
        )
        held = self._show_gate.probability(x) < settings.showGateThreshold
        put = Put(text[:offset], text[offset:], offer.text, x, held)
        self._show_gate.put(ask.doc.uri, put)
        if held:
            self._telemetry.counts["held_back"] += 1
            if offer.origin is not Origin.TYPED_THROUGH:  # a rest held back goes on to the model
                self._telemetry.no_answer("held_back", ask.where)
        return held
