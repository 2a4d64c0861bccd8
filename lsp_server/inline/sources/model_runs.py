"""What the sources that run the model share: the run itself (the background prefill steps aside
and chat generations wait while it lasts) and its completion read as an outcome."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from inference.generate import Finish
from lsp_server.completion.run import Completion
from lsp_server.inline.answers import Origin
from lsp_server.inline.flights import Flight, Flights
from lsp_server.inline.prefill import BackgroundPrefill
from lsp_server.inline.sources.base import Attempt, NoAnswer, Offer
from lsp_server.serving.model_lifecycle import ModelLifecycle
from lsp_server.serving.scheduler import Gate
from lsp_server.text.documents import Documents
from lsp_server.text.positions import clamp_character, offset_at


class ModelRuns:
    def __init__(
        self,
        models: ModelLifecycle,
        documents: Documents,
        prefill: BackgroundPrefill,
        gate: Gate,
        flights: Flights,
    ) -> None:
        self._models = models
        self._documents = documents
        self._prefill = prefill
        self._gate = gate
        self._flights = flights

    @contextlib.asynccontextmanager
    async def aside(self) -> AsyncIterator[None]:
        """While a request waits on the model, the background prefill stands aside (not during
        the debounce: with a key every 90 ms it would get no time at all) and chat waits."""
        async with self._prefill.step_aside():
            with self._gate.foreground():
                yield

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn` on a model thread."""
        async with self.aside():
            return await self._models.run(fn, *args, **kwargs)

    async def fly(self, attempt: Attempt, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, on_text=..., **kwargs)` on a model thread as the document's run in flight
        (lsp_server.inline.flights): a newer request may take it over, so the run outlives this
        request's own cancellation by the flights' grace."""
        snap, ask, ticket = attempt.snap, attempt.ask, attempt.ticket
        assert snap is not None and ticket is not None
        offset = offset_at(snap.text, ask.line, clamp_character(snap.text, ask.line, ask.character))
        flight = Flight(snap.uri, snap.text[:offset], snap.text[offset:], ticket.cancel)
        task = asyncio.ensure_future(self._models.run(fn, *args, on_text=flight.wrote, **kwargs))
        flight.task = task
        self._flights.started(flight)
        task.add_done_callback(lambda _: self._flights.ended(flight))
        task.add_done_callback(_retrieved)  # an abandoned run's error is its requests' no longer
        attempt.flight = flight
        async with self.aside():
            return await asyncio.shield(task)

    def outcome(
        self, attempt: Attempt, done: Completion, origin: Origin, prefetch_after: bool = False
    ) -> Offer | NoAnswer:
        """The model's completion as what the request ends with."""
        attempt.counts["quality_fallbacks"] += done.syntax_rejected
        attempt.counts["standard_retries"] += done.retried_on_standard
        result, snap, ask = done.result, attempt.snap, attempt.ask
        assert snap is not None and attempt.ticket is not None
        if result is not None and result.finish is Finish.CANCELLED:
            return NoAnswer("cancelled")
        doc = self._documents.get(snap.uri)
        if attempt.ticket.cancel.is_set() or doc is None or doc.version != snap.version:
            return NoAnswer("stale", "stale_dropped")  # the document moved on while we generated
        attempt.counts["cache_hits"] += bool(result and result.cached)
        if not done.text or result is None:
            return NoAnswer(done.empty_reason or "model_empty", "empty")
        notice = None
        if result.fallback:
            notice = (
                f"fastcomplete: completions come from the {result.variant} model for now "
                f"({result.fallback_reason})"
            )
        character = clamp_character(snap.text, ask.line, ask.character)
        return Offer(
            origin,
            done.text,
            result,
            snap.text,
            offset_at(snap.text, ask.line, character),
            alternatives=done.alternatives,
            completion=done,
            prefetch_after=prefetch_after,
            notice=notice,
        )


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
