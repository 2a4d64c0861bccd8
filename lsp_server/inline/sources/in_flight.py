"""An earlier key's answer, still being written at this place, that agrees with what the person
typed since: its rest, once written, instead of a run of our own (lsp_server.inline.flights).
Passes when there is none, or when it turns out not to agree; the next sources then cancel it
and ask the model afresh."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from lsp_server.inline.answers import Origin
from lsp_server.inline.flights import Flights
from lsp_server.inline.show_gate import rest_logprobs
from lsp_server.inline.sources.base import Attempt, NoAnswer, Offer
from lsp_server.inline.sources.model_runs import ModelRuns


class InFlight:
    def __init__(self, flights: Flights, runs: ModelRuns) -> None:
        self._flights = flights
        self._runs = runs

    async def attempt(self, attempt: Attempt) -> Offer | NoAnswer | None:
        ask = attempt.ask
        flight = self._flights.get(ask.doc.uri)
        offset = ask.offset
        if flight is None or flight.task is None or offset is None:
            return None
        if ask.invoked or ask.inserted is not None:
            return None  # asked for explicitly, or after a selected item: its own run
        typed = flight.typed_since(ask.text, offset)
        if not typed or not flight.agrees(typed):
            return None
        flight.adopted = True
        try:
            async with self._runs.aside():
                _, done = await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            self._flights.abandon(flight)  # a newer key: it may take the run over in turn
            raise
        except Exception:  # the run failed: our own run reports what is wrong
            return None
        if ask.doc.version != ask.version:
            return NoAnswer("stale", "stale_dropped")  # typed on while waiting
        text, result = done.text, done.result
        if result is None or not text.startswith(typed) or len(text) == len(typed):
            attempt.counts["in_flight_missed"] += 1
            return None
        rest = text[len(typed) :]
        own = replace(result, logprobs=rest_logprobs(result.logprobs, len(typed), len(rest)))
        # The person is typing this line through: the line after it, computed while they type
        # the rest, is ready at the line's end (where the next key would start it from scratch).
        return Offer(
            Origin.IN_FLIGHT, rest, own, ask.text, offset, completion=done, prefetch_after=True
        )
