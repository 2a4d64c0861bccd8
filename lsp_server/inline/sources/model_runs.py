"""What the sources that run the model share: the run itself (the background prefill steps aside
and chat generations wait while it lasts) and its completion read as an outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inference.generate import Finish
from lsp_server.completion.run import Completion
from lsp_server.inline.answers import Origin
from lsp_server.inline.prefill import BackgroundPrefill
from lsp_server.inline.sources.base import Attempt, NoAnswer, Offer
from lsp_server.serving.model_lifecycle import ModelLifecycle
from lsp_server.serving.scheduler import Gate
from lsp_server.text.documents import Documents
from lsp_server.text.positions import clamp_character, offset_at


class ModelRuns:
    def __init__(
        self, models: ModelLifecycle, documents: Documents, prefill: BackgroundPrefill, gate: Gate
    ) -> None:
        self._models = models
        self._documents = documents
        self._prefill = prefill
        self._gate = gate

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn` on a model thread. The background prefill stands aside meanwhile (not during the
        debounce: with a key every 90 ms it would get no time at all)."""
        async with self._prefill.step_aside():
            with self._gate.foreground():
                return await self._models.run(fn, *args, **kwargs)

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
