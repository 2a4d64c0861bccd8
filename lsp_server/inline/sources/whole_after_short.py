"""The short prompt gave nothing to show: answer from the whole prompt once the background
prefill has it (within T_WHOLE_WAIT_S; the next key cancels the wait), else end with the short
prompt's reason."""

from __future__ import annotations

from lsp_server.completion.planner import Planner
from lsp_server.config.tuning import T_WHOLE_WAIT_S
from lsp_server.inline.answers import Origin
from lsp_server.inline.prefill import BackgroundPrefill
from lsp_server.inline.sources.base import Attempt, NoAnswer, Offer
from lsp_server.inline.sources.model_runs import ModelRuns


class WholeAfterShort:
    def __init__(self, runs: ModelRuns, planner: Planner, prefill: BackgroundPrefill) -> None:
        self._runs = runs
        self._planner = planner
        self._prefill = prefill

    async def attempt(self, attempt: Attempt) -> Offer | NoAnswer | None:
        plan, short, ticket = attempt.plan, attempt.done, attempt.ticket
        if plan is None or plan.deferred is None or short is None or ticket is None:
            return None
        if not await self._prefill.until_cached(attempt.ask.aim, ticket.cancel, T_WHOLE_WAIT_S):
            return self._runs.outcome(attempt, short, Origin.SHORT)
        attempt.counts["whole_after_short"] += 1
        done = await self._runs.run(
            self._planner.run, plan.deferred, attempt.snap, attempt.view, ticket.cancel
        )
        attempt.done = done
        return self._runs.outcome(attempt, done, Origin.WHOLE_AFTER_SHORT)
