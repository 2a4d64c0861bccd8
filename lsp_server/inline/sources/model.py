"""The model on the prompt at the cursor: the whole prompt, or, when it is too cold to prefill in
time, the nearest lines (coldContext) while the whole one goes on prefilling where the person is.
A short prompt's answer that post-processing rejected passes to WholeAfterShort."""

from __future__ import annotations

from inference.generate import Finish
from lsp_server.completion.planner import Planner
from lsp_server.completion.run import Completion
from lsp_server.config.tuning import MAX_ALTERNATIVE_ITEMS, T_REST_S
from lsp_server.inline.answers import Origin
from lsp_server.inline.prefill import BackgroundPrefill
from lsp_server.inline.sources.base import Attempt, NoAnswer, Offer
from lsp_server.inline.sources.model_runs import ModelRuns


class ModelOnPrompt:
    def __init__(self, runs: ModelRuns, planner: Planner, prefill: BackgroundPrefill) -> None:
        self._runs = runs
        self._planner = planner
        self._prefill = prefill

    async def attempt(self, attempt: Attempt) -> Offer | NoAnswer | None:
        """Raises PositionError, RoutingError."""
        ask, ticket = attempt.ask, attempt.ticket
        assert ticket is not None
        plan, done = await self._runs.fly(
            attempt,
            self._planner.plan_and_run,
            attempt.snap,
            attempt.view,
            ticket.cancel,
            cold_ok=True,
            resting=ask.doc.still_for_s() >= T_REST_S,
            candidates=MAX_ALTERNATIVE_ITEMS if ask.invoked else 1,
        )
        attempt.plan, attempt.done = plan, done
        if plan.deferred is None:
            if ask.inserted is None and ran_to_end(done):
                self._prefill.cached_by_request(ask.aim)
            return self._runs.outcome(attempt, done, Origin.MODEL, prefetch_after=True)
        # Answered from the nearest lines: the whole prompt goes on prefilling where the person
        # is (for the next key; before any prefetch, which needs it too).
        attempt.counts["short_context"] += 1
        if ask.inserted is None:
            self._prefill.offer(ask.aim, plan.deferred)
            if rejected(done):
                return None
        return self._runs.outcome(attempt, done, Origin.SHORT)


def ran_to_end(done: Completion) -> bool:
    """Whether the request's own prefill finished (so its whole prompt is cached)."""
    result = done.result
    return (
        result is not None
        and result.generation is not None  # not a cache hit: that prefills nothing
        and result.finish is not Finish.CANCELLED
    )


def rejected(done: Completion) -> bool:
    """A short prompt's answer that came back empty (not cancelled, not timed out)."""
    return not done.text and done.result is not None and done.empty_reason != "cancelled"
