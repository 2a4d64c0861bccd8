"""Model work while the person is not waiting on it: the background prefill of the whole prompt
where they are (lsp_server.inline.prefill), and the prefetch of the suggestion after a shown one."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from inference.errors import ModelLoadError
from inference.router import RoutingError
from lsp_server.completion.plan import CompletionPlan
from lsp_server.completion.planner import Planner
from lsp_server.config.settings import Settings
from lsp_server.config.tuning import T_SETTLE_S
from lsp_server.inline.answers import Answer, Origin
from lsp_server.inline.memory import Remembered, SuggestionMemory
from lsp_server.inline.prefill import Aim, BackgroundPrefill, opened_at
from lsp_server.serving.model_lifecycle import ModelLifecycle
from lsp_server.serving.scheduler import Gate, LatestWins
from lsp_server.telemetry.counts import Spawn, Telemetry
from lsp_server.text.documents import Documents, Snapshot, with_insertion
from lsp_server.text.positions import PositionError, offset_at, position_at

log = logging.getLogger(__name__)


def _idle_work_failed(what: str, exc: Exception) -> None:
    """Idle work must never take the server down; a position gone or no model is routine."""
    if isinstance(exc, PositionError | RoutingError | ModelLoadError):
        log.debug("%s skipped: %s", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)


@dataclass(frozen=True)
class Ahead:
    """A prefetch in progress: the document it assumes, and where its suggestion is anchored."""

    text: str
    offset: int
    done: asyncio.Event

    def at(self, line: int, character: int) -> bool:
        try:
            return offset_at(self.text, line, character) == self.offset
        except PositionError:
            return False

    def typed_toward(self, text: str, offset: int) -> bool:
        """Whether `text`, its cursor at `offset`, is this document with the suggestion it
        assumes partly typed: typing on reaches it."""
        return (
            offset <= self.offset
            and self.text[self.offset :] == text[offset:]
            and self.text.startswith(text[:offset])
        )


class IdleWork:
    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        documents: Documents,
        models: ModelLifecycle,
        planner: Planner,
        memory: SuggestionMemory,
        gate: Gate,
        telemetry: Telemetry,
        spawn: Spawn,
    ) -> None:
        self._settings = settings
        self._documents = documents
        self._models = models
        self._memory = memory
        self._gate = gate
        self._telemetry = telemetry
        self._spawn = spawn
        self._planner = planner
        self.prefill = BackgroundPrefill(self._plan_whole, self._prefill)
        self.prefetches = LatestWins()
        self.ahead: dict[str, Ahead] = {}  # per document: the prefetch being computed
        self._waiting: Aim | None = None  # the newest aim while no model was loaded

    # -- where the person is --------------------------------------------------------------------

    def aim(self, aim: Aim, delay_s: float | None = None) -> None:
        """Point the background prefill at `aim`, from `delay_s` on; by default once a request
        that follows at once is past its debounce. While no model is loaded it is remembered:
        the prefill starts there once one is (an editor opened on a file sends its focus while
        the model still loads, and the person's cursor, not a guess, is what to warm)."""
        if not self._models.serving:
            self._waiting = aim
            return
        if delay_s is None:
            delay_s = self._settings().debounceMs / 1000 + T_SETTLE_S
        self.prefill.aim(aim, delay_s)

    def aim_at_opened(self, uri: str) -> None:
        if not self._models.serving:
            self._waiting = None  # a newer document: loading aims at it (or at its focus)
            return  # no model yet: not worth a parse now (loading aims when one is)
        snap = self._documents.snapshot(uri)
        if snap is not None:
            self.aim_at_offset(snap.uri, snap.version, snap.text, opened_at(snap.text, snap.tree))

    def aim_at_latest(self) -> None:
        """A model just became ready: warm where the person was last seen, if that document is
        still as it was then, else where they most likely work in the latest document."""
        waiting, self._waiting = self._waiting, None
        uri = self._documents.latest()
        doc = self._documents.get(waiting.uri) if waiting is not None else None
        if waiting is not None and waiting.uri == uri and doc and doc.version == waiting.version:
            self.aim(waiting, 0.0)
        elif uri is not None:
            self.aim_at_opened(uri)

    def aim_at_offset(self, uri: str, version: int, text: str, offset: int) -> None:
        self.aim(Aim(uri, version, *position_at(text, offset)))

    def forget(self, key: str) -> None:
        """The document is closed: nothing more to prefill or prefetch in it."""
        self.prefill.forget(key)
        self.prefetches.cancel(key)

    # -- the whole prompt, prefilled ------------------------------------------------------------

    async def _plan_whole(self, aim: Aim) -> CompletionPlan | None:
        """The whole prompt at `aim` for the background prefill (None: nothing to prefill)."""
        snap = self._documents.snapshot(aim.uri)
        if snap is None or snap.version != aim.version or self._planner.unservable(snap):
            return None
        view = self._planner.cursor_view(snap, aim.line, aim.character)
        plan = await self._models.run(self._planner.plan, snap, view)
        return plan if plan.prompt.strip() and plan.serving is not None else None

    async def _prefill(self, plan: CompletionPlan, cancel: threading.Event) -> None:
        engine = self._models.engine
        assert engine is not None and plan.serving is not None
        await self._models.run(
            engine.warm, plan.serving, plan.prompt, plan.tokens, cancel, plan.config.heal
        )

    # -- the suggestion after the shown one -----------------------------------------------------

    async def until_prefetched(self, key: str, text: str, line: int, character: int) -> bool:
        """Wait for the prefetch that assumed exactly this document and cursor, if one runs
        (accepted before the suggestion after it was ready). False when none does."""
        pending = self.ahead.get(key)
        if pending is None or pending.text != text or not pending.at(line, character):
            return False
        await pending.done.wait()
        return True

    def stop_prefetch(self, key: str, text: str, offset: int | None) -> None:
        """A request goes to the model: the prefetch in `key` stops, unless the person is typing
        the suggestion it comes after (a rest the show gate held back, say): the end they are
        typing toward needs it."""
        pending = self.ahead.get(key)
        if pending is None or offset is None or not pending.typed_toward(text, offset):
            self.prefetches.cancel(key)

    def prefetch_after(
        self, uri: str, version: int, text: str, shown: Answer, snap: Snapshot | None = None
    ) -> None:
        """Compute the suggestion after `shown` in `text` (version `version` of `uri`) in the
        background (see `prefetch`), unless it is being computed or was: each key typed through
        the same line's rest ends it the same. `snap`: `text` parsed, when the request made it
        (an answer taken over from a run in flight came before the request settled)."""
        try:
            offset = offset_at(text, shown.line, shown.character)
        except PositionError:
            return
        ahead, end = text[:offset] + shown.text + text[offset:], offset + len(shown.text)
        pending = self.ahead.get(uri)
        if pending is not None and (pending.text, pending.offset) == (ahead, end):
            return
        if self._memory.prefetched(uri, ahead, end):
            return
        if snap is None:
            snap = self._documents.snapshot(uri)
            if snap is None or snap.version != version or snap.text != text:
                return
        self._spawn(self.prefetch(snap, shown))

    async def prefetch(self, snap: Snapshot, shown: Answer) -> None:
        """The suggestion after `shown`, as if it were accepted, computed in idle time and
        remembered after it: accepting then shows the next one without a model run."""
        ticket = self.prefetches.begin(snap.uri)
        mine: Ahead | None = None
        try:
            await asyncio.sleep(0)  # the shown answer goes out first
            if not self.prefetches.is_current(ticket) or self._gate.busy:
                return
            offset = offset_at(snap.text, shown.line, shown.character)
            ahead = with_insertion(snap, offset, shown.text)
            end = offset + len(shown.text)
            self.ahead[snap.uri] = mine = Ahead(ahead.text, end, asyncio.Event())
            line, character = position_at(ahead.text, end)
            view = self._planner.cursor_view(ahead, line, character)
            _, done = await self._models.run(
                self._planner.plan_and_run, ahead, view, ticket.cancel, ahead=True
            )
            if self._settings().debug:
                log.info(
                    "prefetch %s:%d:%d -> %r (%s)",
                    snap.uri,
                    line,
                    character,
                    done.text,
                    "cancelled" if ticket.cancel.is_set() else done.empty_reason or "done",
                )
            if done.text and not ticket.cancel.is_set():
                item = Remembered(
                    ahead.text[:end], ahead.text[end:], done.text, Origin.PREFETCHED, done.result
                )
                self._memory.remember(snap.uri, item)
                self._telemetry.counts["prefetched"] += 1
        except Exception as exc:
            _idle_work_failed("prefetch", exc)
        finally:
            self.prefetches.finish(ticket)
            if mine is not None:
                mine.done.set()  # a request waiting for it looks in the memory now
                if self.ahead.get(snap.uri) is mine:
                    del self.ahead[snap.uri]
