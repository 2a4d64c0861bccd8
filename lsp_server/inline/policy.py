"""The inline-completion policy: resolve the request, then try the answer sources top to bottom
(lsp_server.inline.sources: what is being typed through, what is remembered here, the model on
the prompt, the whole prompt after a short one) until one offers a suggestion or ends the
request; whatever answered goes through one place (lsp_server.inline.showing)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from inference.router import RoutingError
from lsp_server.config.settings import Settings
from lsp_server.errors import BadRequest
from lsp_server.inline.answers import Answer, Origin, Selected
from lsp_server.inline.flights import Flights
from lsp_server.inline.idle_work import IdleWork
from lsp_server.inline.memory import Match, SuggestionMemory
from lsp_server.inline.prefill import Aim
from lsp_server.inline.showing import Showing
from lsp_server.inline.sources.base import AnswerSource, Ask, Attempt, NoAnswer, Offer
from lsp_server.serving.scheduler import LatestWins
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Documents, unknown_document
from lsp_server.text.positions import PositionError, position_at

log = logging.getLogger(__name__)


class InlinePolicy:
    def __init__(
        self,
        chain: Sequence[AnswerSource],
        showing: Showing,
        *,
        settings: Callable[[], Settings],
        documents: Documents,
        memory: SuggestionMemory,
        idle: IdleWork,
        latest: LatestWins,
        flights: Flights,
        telemetry: Telemetry,
        after_routing_error: Callable[[], None],
    ) -> None:
        self.chain = tuple(chain)
        self._showing = showing
        self._settings = settings
        self._documents = documents
        self._memory = memory
        self._idle = idle
        self._latest = latest
        self._flights = flights
        self._telemetry = telemetry
        self._after_routing_error = after_routing_error  # load the fallback for the next one

    async def complete(
        self,
        uri: str,
        line: int,
        character: int,
        invoked: bool = False,
        selected: Selected | None = None,
    ) -> Answer | None:
        """The completion at (line, UTF-16 character), or None (disabled, not ready, superseded,
        empty: the stats' emptyReasons count why). Raises BadRequest for an unknown document or
        a position outside it. `invoked`: asked for explicitly, so up to MAX_ALTERNATIVE_ITEMS
        items, ranked, freshly computed (no type-through, no debounce). `selected`: the suggest
        widget's item; the answer is then anchored after it, as if it were accepted."""
        counts = self._telemetry.counts
        counts["requests"] += 1
        counts["invoked"] += invoked
        ask = await self._remembered(self._resolve(uri, line, character, invoked, selected))
        self._showing.asked(ask)
        attempt = Attempt(ask)
        try:
            return await self._down_the_chain(attempt)
        except PositionError as exc:
            counts["bad_position"] += 1
            raise BadRequest(f"{uri}: {exc}") from exc
        except asyncio.CancelledError:
            if attempt.flight is not None:
                self._flights.abandon(attempt.flight)  # unless the next key's request takes it
            elif attempt.ticket is not None:
                attempt.ticket.cancel.set()  # the worker thread stops at its next forward pass
            self._showing.nothing(ask, NoAnswer("cancelled"))
            raise
        except RoutingError as exc:
            notice = f"fastcomplete: no model could complete: {exc}"
            self._showing.nothing(ask, NoAnswer("error", "errors", notice, "error"))
            self._after_routing_error()
            return None
        finally:
            self._showing.count(attempt.counts)
            if attempt.ticket is not None:
                self._latest.finish(attempt.ticket)

    async def _down_the_chain(self, attempt: Attempt) -> Answer | None:
        ask = attempt.ask
        for source in self.chain:
            outcome = await source.attempt(attempt)
            if outcome is None:
                continue
            if isinstance(outcome, NoAnswer):
                self._showing.nothing(ask, outcome)
                return None
            answer = self._showing.show(ask, outcome)
            if answer is None and outcome.origin is Origin.TYPED_THROUGH:
                continue  # a rest held back goes to the model, which now sees what was typed
            self._after(attempt, outcome, answer)
            return answer
        return None

    def _after(self, attempt: Attempt, offer: Offer, answer: Answer | None) -> None:
        """The suggestion after a shown one, computed in idle time (prefetch)."""
        if answer is not None and offer.prefetch_after and self._settings().prefetch:
            ask = attempt.ask
            self._idle.prefetch_after(
                ask.doc.uri, ask.version, offer.document, answer, attempt.snap
            )

    def cancel(self, key: str) -> None:
        """The document closed: its request in flight ends."""
        self._latest.cancel(key)
        self._flights.cancel(key)

    # -- the request, resolved ------------------------------------------------------------------

    def _resolve(
        self, uri: str, line: int, character: int, invoked: bool, selected: Selected | None
    ) -> Ask:
        doc = self._documents.get(uri)
        if doc is None:
            raise unknown_document(uri)
        aim = Aim(doc.uri, doc.version, line, character)
        self._idle.aim(aim)  # where the person is, whatever becomes of this request
        where = f"{doc.uri}:{line}:{character}"
        if selected is None:
            return Ask(uri, doc, doc.version, doc.text, line, character, invoked, aim, where)
        self._telemetry.counts["after_selected_item"] += 1
        try:
            start, end = selected.span(doc.text)
        except PositionError as exc:
            self._telemetry.counts["bad_position"] += 1
            raise BadRequest(f"{uri}: the selected item's range: {exc}") from exc
        text = doc.text[:start] + selected.text + doc.text[end:]
        line, character = position_at(text, start + len(selected.text))
        inserted = (start, selected.text, end)
        return Ask(uri, doc, doc.version, text, line, character, invoked, aim, where, inserted)

    async def _remembered(self, ask: Ask) -> Ask:
        """`ask` with the remembered suggestion its cursor is in (one shown, or the prefetch of
        exactly this place, waited for if it is still being computed), when one may answer."""
        settings = self._settings()
        if ask.invoked or not settings.typeThrough or not settings.enabled_for(ask.doc.language_id):
            return ask
        found = self._find(ask)
        if found is None and await self._idle.until_prefetched(
            ask.doc.uri, ask.text, ask.line, ask.character
        ):
            found = self._find(ask)
        return ask if found is None else replace(ask, remembered=found)

    def _find(self, ask: Ask) -> Match | None:
        offset = ask.offset
        return None if offset is None else self._memory.find(ask.doc.uri, ask.text, offset)
