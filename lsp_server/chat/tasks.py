"""Explain and refactor: a selection's code sent to the standard model (or the remote in front
of it) as a chat, streamed back; a rewrite is applied only when it passes refactor_verdict."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inference.engine import EngineResult
from inference.generate import Finish, GenerationConfig
from inference.router import REMOTE, STANDARD, Task
from lsp_server.chat.prompts import (
    EXPLAIN_CONFIG,
    REFACTOR_CONFIG,
    Messages,
    ended_explanation,
    explain_messages,
    extract_code,
    readable_part,
    refactor_messages,
    refactor_verdict,
)
from lsp_server.config.settings import Settings
from lsp_server.errors import BadRequest
from lsp_server.serving.model_lifecycle import ModelLifecycle
from lsp_server.serving.notices import Notices
from lsp_server.serving.scheduler import Gate
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Documents, Snapshot, snapshot_of
from lsp_server.text.positions import PositionError, offset_at


@dataclass(frozen=True)
class Selection:
    snapshot: Snapshot
    code: str
    start: int  # character offsets of the selection in the snapshot's text
    end: int

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


@dataclass(frozen=True)
class Rewrite:
    model: str
    text: str | None  # the code to put in place of the selection; None: not to be applied
    reason: str | None  # why not, when not
    cancelled: bool


class ChatTasks:
    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        documents: Documents,
        models: ModelLifecycle,
        gate: Gate,
        notices: Notices,
        telemetry: Telemetry,
    ) -> None:
        self._settings = settings
        self._documents = documents
        self._models = models
        self._gate = gate
        self._notices = notices
        self._telemetry = telemetry

    def selection(self, args: list[Any]) -> Selection:
        """The selected code from [{uri, range}] or [uri, range]."""
        try:
            if len(args) == 1 and isinstance(args[0], dict):
                uri, raw = args[0]["uri"], args[0]["range"]
            else:
                uri, raw = args[0], args[1]
            ends = [(raw[k]["line"], raw[k]["character"]) for k in ("start", "end")]
        except (KeyError, IndexError, TypeError) as exc:
            raise BadRequest("expected arguments [{uri, range: {start, end}}]") from exc
        snap = snapshot_of(self._documents, uri)
        try:
            start, end = sorted(offset_at(snap.text, line, char) for line, char in ends)
        except (PositionError, TypeError) as exc:
            raise BadRequest(f"{uri}: {exc}") from exc
        return Selection(snap, snap.text[start:end], start, end)

    async def chat(
        self,
        task: Task,
        chat: Messages,
        config: GenerationConfig,
        on_text: Callable[[str], None],
        cancel: threading.Event,
    ) -> EngineResult:
        """A generation on the standard model (or the remote in front of it), streamed."""
        engine, settings = self._models.engine, self._settings()
        if engine is None or not self._models.ready.is_set():
            raise BadRequest("models are still loading; try again in a moment")
        if settings.remote is None:  # a remote in front loads it only if it falls back
            await self._models.ensure_loaded(STANDARD)  # else the fast model answers
        result = await self._models.run(
            engine.generate,
            task,
            "",
            config,
            fast_mode=settings.fastMode,
            cancel=cancel,
            on_text=on_text,
            pause=self._gate.pauser(cancel),
            messages=chat,
        )
        if result.fallback and settings.remote and result.variant != REMOTE:
            self._notices.tell_once(
                f"fastcomplete: the remote endpoint failed ({result.fallback_reason}); "
                "using the local standard model"
            )
        return result

    async def explain(
        self, sel: Selection, on_text: Callable[[str], None], cancel: threading.Event
    ) -> dict[str, Any]:
        if not sel.code.strip():
            raise BadRequest("nothing selected to explain")
        chat = explain_messages(sel.code, sel.snapshot.language_id or "text")
        streamed = ""

        def sentences(text: str) -> None:  # whole sentences only: a cut answer ends on one
            nonlocal streamed
            readable = readable_part(text)
            if len(readable) > len(streamed):
                streamed = readable
                on_text(readable)

        result = await self.chat(Task.EXPLAIN, chat, EXPLAIN_CONFIG, sentences, cancel)
        self._telemetry.counts["explains"] += 1
        cancelled = result.finish is Finish.CANCELLED
        cut = result.finish is Finish.LENGTH
        text = ended_explanation(result.text, cut, EXPLAIN_CONFIG.max_new_tokens)
        if text != streamed:
            on_text(text)
        return {"markdown": text, "model": result.model_id, "cancelled": cancelled, "cut": cut}

    async def rewrite(
        self, sel: Selection, on_text: Callable[[str], None], cancel: threading.Event
    ) -> Rewrite:
        if not sel.code.strip():
            raise BadRequest("nothing selected to rewrite")
        language = sel.snapshot.language_id or "text"
        chat = refactor_messages(sel.code, language)
        result = await self.chat(Task.REFACTOR, chat, REFACTOR_CONFIG, on_text, cancel)
        if result.finish is Finish.CANCELLED:
            return Rewrite(result.model_id, None, "cancelled", True)
        rewritten = extract_code(result.text)
        text = sel.snapshot.text
        verdict = refactor_verdict(text, sel.code, rewritten, sel.start, sel.end, language)
        if verdict is not None:
            self._telemetry.counts["refactors_refused"] += 1
            self._notices.tell(f"fastcomplete: rewrite not applied: {verdict}", "info")
            return Rewrite(result.model_id, None, verdict, False)
        return Rewrite(result.model_id, rewritten, None, False)
