"""The completion service: what the language server does, as a plain object without pygls.

A facade over rooms with one job each (docs/architecture.md): the settings and what the user is
told (notices), the models (model_lifecycle), the open documents (documents), where and on what
a completion is planned (planner), the inline-completion policy (inline), idle work: prefill and
prefetch (idle_work), explain and refactor (chat_tasks), and the counts (telemetry). Work runs on
immutable snapshots in worker threads; the event loop only schedules. `lsp_server.protocol.server`
translates LSP to these calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from inference.engine import Engine, EngineConfig
from inference.paths import fastcomplete_home
from inference.router import STANDARD
from lsp_server.chat.tasks import ChatTasks
from lsp_server.completion.planner import Planner
from lsp_server.config.settings import Settings, merge
from lsp_server.errors import BadRequest
from lsp_server.inline.flights import Flights
from lsp_server.inline.idle_work import IdleWork
from lsp_server.inline.memory import SuggestionMemory
from lsp_server.inline.policy import InlinePolicy
from lsp_server.inline.prefill import Aim
from lsp_server.inline.rejections import Rejections
from lsp_server.inline.show_gate import ShowGate, gate_file
from lsp_server.inline.showing import Showing
from lsp_server.inline.sources.in_flight import InFlight
from lsp_server.inline.sources.model import ModelOnPrompt
from lsp_server.inline.sources.model_runs import ModelRuns
from lsp_server.inline.sources.remembered import RememberedHere
from lsp_server.inline.sources.settled import Settled
from lsp_server.inline.sources.typed_through import TypedThrough
from lsp_server.inline.sources.whole_after_short import WholeAfterShort
from lsp_server.serving.model_lifecycle import EngineFactory, ModelLifecycle, Progress, engine_for
from lsp_server.serving.notices import Notices, Notify, Status
from lsp_server.serving.scheduler import Gate, LatestWins
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Documents, Snapshot, snapshot_of
from lsp_server.text.positions import PositionError
from lsp_server.workspace.index import Indexer
from lsp_server.workspace.recent_edits import RecentEdits

log = logging.getLogger(__name__)


class CompletionService:
    def __init__(
        self,
        notify: Notify | None = None,
        engine_config: EngineConfig | None = None,
        status: Status | None = None,
        make_engine: EngineFactory | None = None,
    ) -> None:
        """`make_engine`: the engine for the settings (default: the models they name, or
        `engine_config`; tests pass a scripted one)."""
        self.settings = Settings()
        current = lambda: self.settings  # noqa: E731 - components read the settings of now
        self.notices = Notices(notify, status)
        self.documents = Documents()
        self.telemetry = Telemetry(self.documents, current, self.spawn)
        self.recent_edits = RecentEdits(
            lambda uri: d.text if (d := self.documents.get(uri)) else None
        )
        self.documents.on_edit.append(self.recent_edits.edited)
        factory = make_engine or functools.partial(engine_for, config=engine_config)
        self.models = ModelLifecycle(self.notices, current, factory)
        self.indexer = Indexer(fastcomplete_home() / "index")
        self.memory = SuggestionMemory()
        self.rejections = Rejections()
        self.show_gate = ShowGate()
        gate = Gate()  # completions before chat tasks
        self.planner = Planner(
            settings=current,
            models=self.models,
            workspace=self.indexer,
            edits=self.recent_edits,
            notices=self.notices,
            telemetry=self.telemetry,
        )
        self.idle = IdleWork(
            settings=current,
            documents=self.documents,
            models=self.models,
            planner=self.planner,
            memory=self.memory,
            gate=gate,
            telemetry=self.telemetry,
            spawn=self.spawn,
        )
        self.inline = self._inline_policy(current, gate)
        self.complete = self.inline.complete  # the inline completion: see InlinePolicy.complete
        self.chat = ChatTasks(
            settings=current,
            documents=self.documents,
            models=self.models,
            gate=gate,
            notices=self.notices,
            telemetry=self.telemetry,
        )
        self._background: set[asyncio.Task] = set()

    def _inline_policy(self, current: Callable[[], Settings], gate: Gate) -> InlinePolicy:
        """The inline policy and its chain of answer sources."""
        latest = LatestWins()  # per document, the newest request
        flights = Flights()  # per document, the model's answer being written
        runs = ModelRuns(self.models, self.documents, self.idle.prefill, gate, flights)
        prefill = self.idle.prefill
        # Where an inline answer comes from, tried top to bottom (lsp_server/inline/sources/).
        chain = (
            TypedThrough(),
            RememberedHere(),
            InFlight(flights, runs),
            Settled(
                current, self.documents, self.planner, latest, self.idle.stop_prefetch, flights
            ),
            ModelOnPrompt(runs, self.planner, prefill),
            WholeAfterShort(runs, self.planner, prefill),
        )
        showing = Showing(
            current, self.rejections, self.show_gate, self.memory, self.telemetry, self.notices
        )
        return InlinePolicy(
            chain,
            showing,
            settings=current,
            documents=self.documents,
            memory=self.memory,
            idle=self.idle,
            latest=latest,
            flights=flights,
            telemetry=self.telemetry,
            after_routing_error=lambda: self.spawn(self.models.ensure_loaded(STANDARD)),
        )

    @property
    def engine(self) -> Engine | None:
        return self.models.engine

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run `coro` in the background, held until it ends."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- settings and models --------------------------------------------------------------------

    def apply_settings(self, raw: Any) -> None:
        before = self.settings.fastMode
        self.settings, errors = merge(self.settings, raw)
        for error in errors:
            self.notices.tell(f"fastcomplete: invalid setting {error}")
        if self.settings.fastMode != before:
            log.info("fast mode %s", "on" if self.settings.fastMode else "off")
            self.memory.clear()  # what the other model suggested is not what was asked for
            if not self.settings.fastMode and self.models.wants_standard():
                self.spawn(self.models.ensure_loaded(STANDARD))

    def use_workspace(self, root: Path | None) -> None:
        """The folder the editor has open: the show gate keeps what it learns per workspace."""
        self.show_gate.use(gate_file(fastcomplete_home(), root))

    def toggle_fast_mode(self) -> dict[str, bool]:
        self.apply_settings({"fastMode": not self.settings.fastMode})
        return {"fastMode": self.settings.fastMode}

    async def load_models(self, progress: Progress | None = None, observer: Any = None) -> None:
        # A document opened before the model was there is warmed once one is.
        await self.models.load(progress, observer, on_ready=self.idle.aim_at_latest)

    # -- documents ------------------------------------------------------------------------------

    def open(self, uri: str, text: str, version: int, language_id: str) -> None:
        self.documents.open(uri, text, version, language_id)
        self.idle.aim_at_opened(uri)

    def change(self, uri: str, version: int, changes: Sequence[Any]) -> None:
        doc = self.documents.change(uri, version, changes)
        if doc is None:
            log.warning("ignored edits to a document that is not open")
            self.notices.tell_once("fastcomplete ignored edits to a document that is not open")
            return
        if doc.edit_end is not None:
            self.idle.aim_at_offset(doc.uri, doc.version, doc.text, doc.edit_end)

    def close(self, uri: str) -> None:
        key = self.documents.key(uri)
        self.inline.cancel(key)
        self.idle.forget(key)
        self.memory.forget(key)
        self.rejections.forget(key)
        self.telemetry.retention.closed(key)
        self.recent_edits.forget(key)
        self.show_gate.forget(key)
        self.documents.close(uri)

    def focus(self, uri: str, line: int | None, character: int | None) -> None:
        """The cursor rests at (line, character) in `uri` (our clients' hint): prefill there now."""
        self.telemetry.counts["focus"] += 1
        doc = self.documents.get(uri)
        if doc is None:
            return  # a focus on a document not synced to us (e.g. an output panel): nothing to do
        self.documents.touch(doc.uri)
        if line is not None and character is not None:
            self.idle.aim(Aim(doc.uri, doc.version, line, character), 0.0)

    def accepted(self, args: Sequence[Any]) -> None:
        """A whole suggestion was accepted (its item's command: [{uri, ...}])."""
        arg = args[0] if args and isinstance(args[0], dict) else {}
        self._taken(arg.get("uri"), arg.get("text"))
        self.telemetry.accepted(args)

    def partially_accepted(
        self, kind: str, length: int, uri: Any, line: Any, character: Any, text: Any
    ) -> None:
        """A word or a line of a suggestion was accepted."""
        self._taken(uri, text)
        self.telemetry.partially_accepted(kind, length, uri, line, character, text)

    def _taken(self, uri: Any, text: Any) -> None:
        if isinstance(uri, str):  # what was passed over there may be offered again
            self.rejections.accepted(self.documents.key(uri))
            accepted = text if isinstance(text, str) and text else None
            self.show_gate.taken(self.documents.key(uri), accepted)

    def snapshot(self, uri: str) -> Snapshot:
        return snapshot_of(self.documents, uri)

    # -- requests -------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        engine = self.engine.stats() if self.engine is not None else {}
        prefill = self.idle.prefill
        return {
            "fastMode": self.settings.fastMode,
            "modelsReady": self.models.ready.is_set(),
            "state": self.notices.state[0],
            **self.telemetry.server_counts(),
            "index": self.indexer.stats(),
            "prefill": {
                "runs": prefill.prefills,
                "interruptions": prefill.interruptions,
                "ready": [r.as_json() for r in prefill.history],
            },
            "acceptance": self.telemetry.acceptance(),
            "gate": {
                "enabled": self.settings.showGate,
                "threshold": self.settings.showGateThreshold,
                **self.show_gate.stats(),
            },
            **engine,
        }

    def debug_document(self, args: Sequence[Any]) -> dict[str, Any]:
        """What the server holds for a document (its text never leaves the machine) and, given a
        position, the prompt a completion there would get."""
        arg = args[0] if args and isinstance(args[0], dict) else {}
        uri = arg.get("uri")
        if not isinstance(uri, str):
            raise BadRequest("expected arguments [{uri, position?: {line, character}}]")
        snap = self.snapshot(uri)
        out: dict[str, Any] = {
            "text": snap.text,
            "version": snap.version,
            "languageId": snap.language_id,
        }
        position = arg.get("position")
        if isinstance(position, dict):
            try:
                line, character = int(position["line"]), int(position["character"])
                view = self.planner.cursor_view(snap, line, character)
                out["prompt"] = self.planner.plan(snap, view).prompt
            except (KeyError, TypeError, ValueError, PositionError) as exc:
                raise BadRequest(f"{uri}: a position inside the document ({exc})") from exc
        return out
