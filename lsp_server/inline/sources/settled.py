"""Not a source of text: the debounce (a newer request in the document drops this one), then who
is not served (disabled, excluded, no model yet, binary, a comment or string kept quiet). Passes
with the snapshot to answer on and the view planning sees of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lsp_server.completion.planner import Planner
from lsp_server.config.settings import Settings
from lsp_server.inline.flights import Flights
from lsp_server.inline.sources.base import Attempt, NoAnswer
from lsp_server.serving.scheduler import LatestWins
from lsp_server.text.documents import Documents, snapshot_of, with_insertion


class Settled:
    def __init__(
        self,
        settings: Callable[[], Settings],
        documents: Documents,
        planner: Planner,
        latest: LatestWins,
        stop_prefetch: Callable[[str, str, int | None], None],
        flights: Flights,
    ) -> None:
        self._settings = settings
        self._documents = documents
        self._planner = planner
        self._latest = latest
        self._stop_prefetch = stop_prefetch
        self._flights = flights

    async def attempt(self, attempt: Attempt) -> NoAnswer | None:
        """Raises PositionError."""
        ask = attempt.ask
        self._stop_prefetch(ask.doc.uri, ask.text, ask.offset)
        self._flights.cancel(ask.doc.uri)  # a run this request did not take over
        ticket = attempt.ticket = self._latest.begin(ask.doc.uri)
        await asyncio.sleep(0 if ask.invoked else self._settings().debounceMs / 1000)
        if not self._latest.is_current(ticket) or ask.doc.version != ask.version:
            return NoAnswer("stale", "stale_dropped")
        snap = snapshot_of(self._documents, ask.uri)  # one incremental parse of the edits since
        if ask.inserted is not None:
            snap = with_insertion(snap, *ask.inserted)
        reason = self._planner.unservable(snap)
        if reason is None and not ask.invoked:
            quiet = self._planner.quiet_place(snap, ask.line, ask.character)
            reason = f"quiet_{quiet}" if quiet else None
        if reason == "refused_binary":
            notice = f"fastcomplete: {ask.uri} holds binary data (NUL bytes): no completions"
            return NoAnswer(reason, notice=notice)
        if reason is not None:
            return NoAnswer(reason)
        attempt.snap = snap
        attempt.view = self._planner.cursor_view(snap, ask.line, ask.character)
        return None
