"""The completion service: what the language server does, as a plain class without pygls.

It owns the settings, the engine and its models, the open documents, completion policy (who is
served, debounce, staleness, large and binary documents), idle warm-up, explain/refactor, the
counters and what the user is told. Work runs on immutable snapshots (lsp_server.documents) in
worker threads; the event loop only schedules. `lsp_server.server` translates LSP to these calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tree_sitter import Tree

from inference.engine import Engine, EngineConfig, EngineResult
from inference.errors import ModelLoadError
from inference.generate import Finish, GenerationConfig
from inference.kv_cache import PoolConfig
from inference.paths import fastcomplete_home
from inference.router import FAST, REMOTE, STANDARD, RoutingError, Task
from lsp_server.completion import (
    MAX_ALTERNATIVES,
    Completion,
    CompletionPlan,
    next_line_plan,
    plan_for_engine,
    run_completion,
)
from lsp_server.context import AboveWindow, prompt_path
from lsp_server.documents import (
    TREE_MAX_CHARS,
    Documents,
    Snapshot,
    around_cursor,
    with_insertion,
)
from lsp_server.indexing import Indexer
from lsp_server.positions import PositionError, clamp_character, offset_at, position_at
from lsp_server.prefill import T_SETTLE_S, Aim, BackgroundPrefill, opened_at
from lsp_server.prompts import (
    EXPLAIN_CONFIG,
    REFACTOR_CONFIG,
    Messages,
    explain_messages,
    extract_code,
    refactor_messages,
    refactor_verdict,
)
from lsp_server.retention import Accepted, RetentionTracker
from lsp_server.scheduler import Gate, LatestWins
from lsp_server.settings import Settings, merge, remote_config
from lsp_server.snippets import RepoSources, SnippetChooser, budget_chars
from lsp_server.suggestions import Remembered, SuggestionMemory

log = logging.getLogger(__name__)

# A short prompt's answer that post-processing rejected waits this long for the whole prompt's
# prefill to finish, then answers from it (a pause at a line's end gets it; a key cancels it).
T_WHOLE_WAIT_S = 3.0
LARGE_DOC_CHARS = TREE_MAX_CHARS  # beyond this, completions see the text around the cursor only

Notify = Callable[[str, str], None]  # (message, level: "error" | "warning" | "info")
Status = Callable[[str, str], None]  # (state: "loading" | "ready" | "error", message)
Progress = Callable[[str, int | None], None]  # (message, percentage; None: done)


def _idle_work_failed(what: str, exc: Exception) -> None:
    """Idle work must never take the server down; a position gone or no model is routine."""
    if isinstance(exc, PositionError | RoutingError | ModelLoadError):
        log.debug("%s skipped: %s", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)


class BadRequest(Exception):
    """The client asked for something impossible: it gets this message as an error response."""


class View(NamedTuple):
    """The text a completion is planned on, the cursor in it, and its tree when it has one."""

    text: str
    line: int
    character: int  # UTF-16
    tree: Tree | None


@dataclass(frozen=True)
class Answer:
    text: str
    result: EngineResult
    line: int
    character: int  # where the item is anchored: a character past the line's end is its end
    alternatives: tuple[str, ...] = ()  # every item to offer, best first; () : just `text`

    @property
    def items(self) -> tuple[str, ...]:
        return self.alternatives or (self.text,)


@dataclass(frozen=True)
class Selected:
    """The item selected in the editor's suggest widget: `text` over the range from (line,
    character) to (end_line, end_character). A suggestion then continues after it, as if it
    were accepted (LSP's selectedCompletionInfo: the editor shows only items that extend it)."""

    line: int
    character: int
    end_line: int
    end_character: int
    text: str

    def span(self, text: str) -> tuple[int, int]:
        """Raises PositionError."""
        start = offset_at(text, self.line, self.character)
        end = offset_at(text, self.end_line, self.end_character)
        return min(start, end), max(start, end)


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


class CompletionService:
    def __init__(
        self,
        notify: Notify,
        engine_config: EngineConfig | None = None,
        status: Status | None = None,
    ) -> None:
        self.notify = notify
        self.on_status = status
        self.state = ("loading", "models not loaded yet")
        self.engine_config = engine_config
        self.settings = Settings()
        self.engine: Engine | None = None
        self.models_ready = threading.Event()
        self.documents = Documents()
        self.retention = RetentionTracker()
        self.documents.on_edit = self.retention.edited
        self.counts: Counter = Counter()
        self.latest = LatestWins()
        self.prefill = BackgroundPrefill(self._plan_whole, self._prefill)
        self.prefetches = LatestWins()
        self.memory = SuggestionMemory()
        self._ahead: dict[str, Ahead] = {}  # per document: the prefetch being computed
        self.gate = Gate()
        # Model work: completions, warm-ups and one chat task can run side by side.
        self.model_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="model")
        self.snippets = SnippetChooser(lambda: budget_chars(self.settings.contextTokens))
        self.indexer = Indexer(fastcomplete_home() / "index")
        self.above_window = AboveWindow()
        self._shown: set[str] = set()
        self._background: set[asyncio.Task] = set()
        self._loading: dict[str, asyncio.Future] = {}  # a model being loaded on first use

    # -- telling the user -----------------------------------------------------------------------

    def tell(self, message: str, level: str = "warning") -> None:
        log.log(logging.INFO if level == "info" else logging.WARNING, message)
        self.notify(message, level)

    def tell_once(self, message: str, level: str = "warning") -> None:
        if message not in self._shown:
            self._shown.add(message)
            self.tell(message, level)

    def set_state(self, state: str, message: str) -> None:
        self.state = (state, message)
        log.info("state: %s (%s)", state, message)
        if self.on_status is not None:
            self.on_status(state, message)

    def no_answer(self, reason: str, where: str = "") -> None:
        """Count why a request got no suggestion; every None answer passes here once."""
        self.counts[f"empty.{reason}"] += 1
        if self.settings.debug:
            log.info("no completion %s: %s", where, reason)

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def in_model_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.model_pool, functools.partial(fn, *args, **kwargs))

    # -- settings and models --------------------------------------------------------------------

    def apply_settings(self, raw: Any) -> None:
        before = self.settings.fastMode
        self.settings, errors = merge(self.settings, raw)
        for error in errors:
            self.tell(f"fastcomplete: invalid setting {error}")
        if self.settings.fastMode != before:
            log.info("fast mode %s", "on" if self.settings.fastMode else "off")
            self.memory.clear()  # what the other model suggested is not what was asked for
            if (
                not self.settings.fastMode
                and self.models_ready.is_set()
                and not self._remote_completes()
            ):
                self.spawn(self.ensure_loaded(STANDARD))

    def make_engine(self) -> Engine:
        if self.engine_config is not None:
            return Engine(self.engine_config)
        fast, standard = self.settings.fastModelPath, self.settings.standardModelPath
        return Engine(
            EngineConfig(
                fast_dir=Path(fast).expanduser() if fast else None,
                standard_dir=Path(standard).expanduser() if standard else None,
                remote=remote_config(self.settings.remote),
                verify_hashes=True,  # a corrupt model is caught while loading, not mid-request
                pool=PoolConfig(budget_bytes=self.settings.kvCacheMB << 20),
                completions_load_models=False,  # never a model load inside a keystroke's request
            )
        )

    def _remote_completes(self) -> bool:
        """A team's server answers completions when fast mode is off (the fast model behind it)."""
        remote = remote_config(self.settings.remote)
        return remote is not None and remote.completions

    def _standard_now(self) -> bool:
        """Whether the standard model loads at start-up rather than on first use."""
        return self.settings.preloadStandard or not (
            self.settings.fastMode or self._remote_completes()
        )

    async def load_models(self, progress: Progress | None = None, observer: Any = None) -> None:
        """Load the fast model in the background, and the standard one after it when it is
        wanted now (preloadStandard, fast mode off, or no fast model); completions are served
        from the first one ready. Otherwise the standard model loads on first use."""
        self.set_state("loading", "loading models")
        self.engine = self.make_engine()
        if observer is not None:
            self.engine.metrics.add_observer(observer)
        if self.engine.cache.problem:
            self.tell_once(f"fastcomplete: {self.engine.cache.problem}")
        missing = []
        for i, variant in enumerate((FAST, STANDARD)):
            if variant == STANDARD and not missing and not self._standard_now():
                log.info("the standard model loads on first use")
                break
            try:
                await self.in_model_thread(self.engine.load, variant)
                if not self.models_ready.is_set():
                    self.models_ready.set()
                    self.set_state("ready", f"{variant} model ready")
                    self._aim_at_latest()  # opened before the model was there: warm it now
            except ModelLoadError as exc:
                missing.append(f"{variant} model: {exc}")
            if progress:
                progress(f"{variant} ready", 50 * i + 50)
        if progress:
            progress("models loaded", None)
        if not self.models_ready.is_set():
            # One message, not one per model: the editor shows each as its own error.
            problems = "; ".join(missing) or "no model could be loaded"
            self.tell_once(
                f"fastcomplete: no completions, no model could be loaded: {problems}", "error"
            )
            self.set_state("error", problems)
        else:
            for problem in missing:
                self.tell_once(f"fastcomplete: {problem}", "error")

    async def ensure_loaded(self, variant: str) -> bool:
        """Load `variant` now unless it is loaded (once, however many ask); False when it
        cannot be (the user is told once). Requests meanwhile are served by the loaded model."""
        if self.engine is None or self.engine.router.loaded(variant) is not None:
            return self.engine is not None
        if variant not in self._loading:
            self._loading[variant] = asyncio.ensure_future(self._load_on_first_use(variant))
        return await asyncio.shield(self._loading[variant])

    async def _load_on_first_use(self, variant: str) -> bool:
        assert self.engine is not None
        # The status bar says so: a person who just switched models sees why the next
        # suggestions still come from the model already loaded.
        self.set_state("loading", f"loading the {variant} model (first use)")
        try:
            await self.in_model_thread(self.engine.load, variant)
            self.set_state("ready", f"{variant} model ready")
            return True
        except ModelLoadError as exc:
            self.set_state("ready", f"{variant} model unavailable")
            self.tell_once(f"fastcomplete: {variant} model: {exc}", "error")
            return False
        finally:
            self._loading.pop(variant, None)

    # -- documents ------------------------------------------------------------------------------

    def open(self, uri: str, text: str, version: int, language_id: str) -> None:
        self.documents.open(uri, text, version, language_id)
        self._aim_at_opened(uri)

    def _aim_at_opened(self, uri: str) -> None:
        if not self._prefills():
            return  # no model yet: not worth a parse now (load_models aims when one is)
        snap = self.documents.snapshot(uri)
        if snap is not None:
            self._aim_at_offset(snap.uri, snap.version, snap.text, opened_at(snap.text, snap.tree))

    def _aim_at_latest(self) -> None:
        uri = self.documents.latest()
        if uri is not None:
            self._aim_at_opened(uri)

    def change(self, uri: str, version: int, changes: Sequence[Any]) -> None:
        doc = self.documents.change(uri, version, changes)
        if doc is None:
            log.warning("ignored edits to a document that is not open")
            self.tell_once("fastcomplete ignored edits to a document that is not open")
            return
        if doc.edit_end is not None:
            self._aim_at_offset(doc.uri, doc.version, doc.text, doc.edit_end)

    def close(self, uri: str) -> None:
        key = self.documents.key(uri)
        self.latest.cancel(key)
        self.prefill.forget(key)
        self.prefetches.cancel(key)
        self.memory.forget(key)
        self.retention.closed(key)
        self.documents.close(uri)

    def focus(self, uri: str, line: int | None, character: int | None) -> None:
        """The cursor rests at (line, character) in `uri` (our clients' hint): prefill there now."""
        self.counts["focus"] += 1
        doc = self.documents.get(uri)
        if doc is None:
            return  # a focus on a document not synced to us (e.g. an output panel): nothing to do
        self.documents.touch(doc.uri)
        if line is not None and character is not None:
            self._aim(Aim(doc.uri, doc.version, line, character), 0.0)

    def _aim(self, aim: Aim, delay_s: float | None = None) -> None:
        """Point the background prefill at `aim` (nowhere while no model is loaded), from
        `delay_s` on; by default once a request that follows at once is past its debounce."""
        if self._prefills():
            if delay_s is None:
                delay_s = self.settings.debounceMs / 1000 + T_SETTLE_S
            self.prefill.aim(aim, delay_s)

    def _aim_at_offset(self, uri: str, version: int, text: str, offset: int) -> None:
        self._aim(Aim(uri, version, *position_at(text, offset)))

    def _prefills(self) -> bool:
        return self.engine is not None and self.models_ready.is_set()

    def snapshot(self, uri: str) -> Snapshot:
        snap = self.documents.snapshot(uri)
        if snap is None:
            raise BadRequest(f"unknown document {uri}: send textDocument/didOpen first")
        return snap

    # -- completions ----------------------------------------------------------------------------

    def _unservable(self, snap: Snapshot) -> str | None:
        """Why no completion can be given in this document now, or None."""
        if not self.settings.enabled_for(snap.language_id):
            return "disabled"
        if self.indexer.exclusions.excluded(snap.uri):
            return "excluded"  # a secret (.env, keys) or listed in .fastcompleteignore
        if not self.models_ready.is_set() or self.engine is None:
            return "not_ready"
        if "\x00" in snap.text:
            return "refused_binary"
        return None

    def _cursor_view(self, snap: Snapshot, line: int, character: int) -> View:
        """What planning sees: the document, or an excerpt of a large one (on the event loop)."""
        if len(snap.text) <= LARGE_DOC_CHARS:
            return View(snap.text, line, character, snap.tree)
        self.counts["trimmed_large"] += 1
        self.tell_once(
            f"fastcomplete: {snap.uri} is large ({len(snap.text) >> 20} MB): completions use the "
            "text around the cursor only",
            "info",
        )
        return View(*around_cursor(snap.text, line, character), None)

    def plan(
        self, snap: Snapshot, view: View, cold_ok: bool = False, candidates: int = 1
    ) -> CompletionPlan:
        """Raises PositionError. Runs on a worker thread: context, route and token ids.
        `cold_ok`: a prompt too cold to prefill in time may be planned short (coldContext).
        `candidates`: how many distinct items to answer with."""
        budget = self.settings.coldPrefillMs / 1000
        return plan_for_engine(
            self.engine,
            view.text,
            view.line,
            view.character,
            self.settings,
            language_id=snap.language_id,
            path=prompt_path(snap.uri),
            repo=self.indexer.index.root.name if self.indexer.index else "",
            snippets=self.snippets.choose(snap.uri, snap.text, view.line, self._sources(snap)),
            tree=view.tree,
            above=self.above_window,
            prefill_budget_s=budget if cold_ok and self.settings.coldContext else None,
            candidates=candidates,
        )

    def _sources(self, snap: Snapshot) -> RepoSources:
        index = self.indexer.index if self.settings.workspaceIndex else None
        return RepoSources(snap.others, index, self.indexer.exclusions)

    def _plan_and_run(
        self,
        snap: Snapshot,
        view: View,
        cancel: threading.Event,
        cold_ok: bool,
        ahead: bool = False,
        candidates: int = 1,
    ) -> tuple[CompletionPlan, Completion]:
        """`ahead`: a prefetch, where the end of a line means the line after it."""
        plan = self.plan(snap, view, cold_ok, candidates)
        if ahead:
            plan = next_line_plan(plan)
        lang = snap.language_id
        done = run_completion(self.engine, plan, view.text, lang, cancel=cancel, tree=view.tree)
        return plan, done

    async def complete(
        self,
        uri: str,
        line: int,
        character: int,
        invoked: bool = False,
        selected: Selected | None = None,
    ) -> Answer | None:
        """The completion at (line, UTF-16 character), or None (disabled, not ready, superseded,
        empty: `no_answer` counts why). Raises BadRequest for an unknown document or a position
        outside it. `invoked`: asked for explicitly, so up to MAX_ALTERNATIVES items, ranked,
        freshly computed (no type-through, no debounce). `selected`: the suggest widget's item;
        the answer is then anchored after it, in the document as if it were accepted."""
        self.counts["requests"] += 1
        self.counts["invoked"] += invoked
        doc = self.documents.get(uri)
        if doc is None:
            raise BadRequest(f"unknown document {uri}: send textDocument/didOpen first")
        key, version = doc.uri, doc.version
        where = f"{key}:{line}:{character}"
        aim = Aim(key, version, line, character)
        self._aim(aim)  # where the person is, whatever becomes of this request
        text = doc.text
        if selected is not None:
            self.counts["after_selected_item"] += 1
            try:
                start, end = selected.span(text)
            except PositionError as exc:
                self.counts["bad_position"] += 1
                raise BadRequest(f"{uri}: the selected item's range: {exc}") from exc
            text = text[:start] + selected.text + text[end:]
            line, character = position_at(text, start + len(selected.text))
        if not invoked and self.settings.typeThrough and self.settings.enabled_for(doc.language_id):
            ahead = self._typed_through(doc.uri, text, line, character)
            if ahead is not None:
                return ahead  # no debounce, no model: the rest of what the editor shows
            pending = self._ahead.get(key)
            if pending is not None and pending.text == text and pending.at(line, character):
                # Accepted before the suggestion after it was ready: wait for that one rather
                # than start the same work again.
                await pending.done.wait()
                ahead = self._typed_through(doc.uri, text, line, character)
                if ahead is not None:
                    return ahead
        self.prefetches.cancel(key)
        ticket = self.latest.begin(key)
        try:
            await asyncio.sleep(0 if invoked else self.settings.debounceMs / 1000)
            if not self.latest.is_current(ticket) or doc.version != version:
                self.counts["stale_dropped"] += 1
                self.no_answer("stale", where)
                return None
            snap = self.snapshot(uri)  # one incremental parse of the edits since the last one
            if selected is not None:
                snap = with_insertion(snap, start, selected.text, end)
            reason = self._unservable(snap)
            if reason is not None:
                self.counts[reason] += 1
                self.no_answer(reason, where)
                if reason == "refused_binary":
                    self.tell_once(
                        f"fastcomplete: {uri} holds binary data (NUL bytes): no completions"
                    )
                return None
            view = self._cursor_view(snap, line, character)
            # The background prefill stands aside while the model works for this request (not
            # during the debounce: with a key every 90 ms it would get no time at all).
            async with self.prefill.step_aside():
                with self.gate.foreground():
                    candidates = MAX_ALTERNATIVES if invoked else 1
                    plan, done = await self.in_model_thread(
                        self._plan_and_run, snap, view, ticket.cancel, True, False, candidates
                    )
            if plan.deferred is None:
                if selected is None and self._ran_to_end(done):
                    self.prefill.cached_by_request(aim)
            else:
                # Answered from the nearest lines: the whole prompt goes on prefilling where the
                # person is (for the next key; before any prefetch, which needs it too).
                self.counts["short_context"] += 1
                if selected is None:
                    self.prefill.offer(aim, plan.deferred)
                    if self._rejected(done):
                        done = await self._from_whole(snap, view, plan.deferred, aim, ticket, done)
        except PositionError as exc:
            self.counts["bad_position"] += 1
            raise BadRequest(f"{uri}: {exc}") from exc
        except asyncio.CancelledError:
            ticket.cancel.set()  # the worker thread stops at its next forward pass
            self.counts["cancelled"] += 1
            self.no_answer("cancelled", where)
            raise
        except RoutingError as exc:
            self.counts["errors"] += 1
            self.no_answer("error", where)
            self.tell_once(f"fastcomplete: no model could complete: {exc}", "error")
            self.spawn(self.ensure_loaded(STANDARD))  # the fallback for the next request
            return None
        finally:
            self.latest.finish(ticket)
        answer = self._answer(snap, line, character, done, ticket.cancel)
        if answer is not None and plan.deferred is None and self.settings.prefetch:
            self.spawn(self._prefetch(snap, answer))
        return answer

    @staticmethod
    def _ran_to_end(done: Completion) -> bool:
        """Whether the request's own prefill finished (so its whole prompt is cached)."""
        result = done.result
        return (
            result is not None
            and result.generation is not None  # not a cache hit: that prefills nothing
            and result.finish is not Finish.CANCELLED
        )

    @staticmethod
    def _rejected(done: Completion) -> bool:
        """A short prompt's answer that came back empty (not cancelled, not timed out)."""
        return not done.text and done.result is not None and done.empty_reason != "cancelled"

    async def _from_whole(
        self,
        snap: Snapshot,
        view: View,
        whole: CompletionPlan,
        aim: Aim,
        ticket: Any,
        short: Completion,
    ) -> Completion:
        """The short prompt gave nothing to show: answer from the whole prompt once the
        background prefill has it (within T_WHOLE_WAIT_S; the next key cancels the wait)."""
        if not await self.prefill.until_cached(aim, ticket.cancel, T_WHOLE_WAIT_S):
            return short
        self.counts["whole_after_short"] += 1
        async with self.prefill.step_aside():
            with self.gate.foreground():
                return await self.in_model_thread(
                    run_completion,
                    self.engine,
                    whole,
                    view.text,
                    snap.language_id,
                    cancel=ticket.cancel,
                    tree=view.tree,
                )

    def _typed_through(self, key: str, text: str, line: int, character: int) -> Answer | None:
        try:
            offset = offset_at(text, line, character)
        except PositionError:
            return None  # the model path reports it
        found = self.memory.find(key, text, offset)
        if found is None:
            return None
        self.counts["answered"] += 1
        self.counts["type_through" if found.typed else "prefetch_hits"] += 1
        if self.settings.debug:
            log.info(
                "completion %s:%d:%d -> %r (%s)",
                key,
                line,
                character,
                found.rest,
                "typed through" if found.typed else "prefetched",
            )
        return Answer(found.rest, found.item.result, line, clamp_character(text, line, character))

    def _answer(
        self, snap: Snapshot, line: int, character: int, done: Completion, cancel: threading.Event
    ) -> Answer | None:
        result = done.result
        where = f"{snap.uri}:{line}:{character}"
        self.counts["quality_fallbacks"] += done.syntax_rejected
        self.counts["standard_retries"] += done.retried_on_standard
        if result is not None and result.finish is Finish.CANCELLED:
            self.counts["cancelled"] += 1
            self.no_answer("cancelled", where)
            return None
        doc = self.documents.get(snap.uri)
        if cancel.is_set() or doc is None or doc.version != snap.version:
            self.counts["stale_dropped"] += 1  # the document moved on while we generated
            self.no_answer("stale", where)
            return None
        self.counts["cache_hits"] += bool(result and result.cached)
        if not done.text or result is None:
            self.counts["empty"] += 1
            self.no_answer(done.empty_reason or "model_empty", where)
            return None
        self.counts["answered"] += 1
        if result.fallback:
            self.tell_once(
                f"fastcomplete: completions come from the {result.variant} model for now "
                f"({result.fallback_reason})"
            )
        if self.settings.debug:
            log.info("completion %s -> %r", where, done.text)
        character = clamp_character(snap.text, line, character)
        offset = offset_at(snap.text, line, character)
        shown = Remembered(snap.text[:offset], snap.text[offset:], done.text, "shown", result)
        self.memory.remember(snap.uri, shown)
        self.counts["alternatives"] += max(0, len(done.alternatives) - 1)
        self.counts["reranked"] += done.reranked
        for step in done.trimmed_by:
            self.counts[f"trimmed.{step}"] += 1
        return Answer(done.text, result, line, character, done.alternatives)

    # -- idle work: warm-up and prefetch ---------------------------------------------------------

    async def _plan_whole(self, aim: Aim) -> CompletionPlan | None:
        """The whole prompt at `aim` for the background prefill (None: nothing to prefill)."""
        snap = self.documents.snapshot(aim.uri)
        if snap is None or snap.version != aim.version or self._unservable(snap) is not None:
            return None
        view = self._cursor_view(snap, aim.line, aim.character)
        plan = await self.in_model_thread(self.plan, snap, view)
        return plan if plan.prompt.strip() and plan.route is not None else None

    async def _prefill(self, plan: CompletionPlan, cancel: threading.Event) -> None:
        assert self.engine is not None and plan.route is not None
        await self.in_model_thread(
            self.engine.warm, plan.route, plan.prompt, plan.tokens, cancel, plan.config.heal
        )

    async def _prefetch(self, snap: Snapshot, shown: Answer) -> None:
        """The suggestion after `shown`, as if it were accepted, computed in idle time and
        remembered after it: accepting then shows the next one without a model run."""
        ticket = self.prefetches.begin(snap.uri)
        mine: Ahead | None = None
        try:
            await asyncio.sleep(0)  # the shown answer goes out first
            if not self.prefetches.is_current(ticket) or self.gate.busy:
                return
            offset = offset_at(snap.text, shown.line, shown.character)
            ahead = with_insertion(snap, offset, shown.text)
            end = offset + len(shown.text)
            self._ahead[snap.uri] = mine = Ahead(ahead.text, end, asyncio.Event())
            line, character = position_at(ahead.text, end)
            view = self._cursor_view(ahead, line, character)
            _, done = await self.in_model_thread(
                self._plan_and_run, ahead, view, ticket.cancel, False, True
            )
            if done.text and not ticket.cancel.is_set():
                item = Remembered(
                    ahead.text[:end], ahead.text[end:], done.text, "prefetch", done.result
                )
                self.memory.remember(snap.uri, item)
                self.counts["prefetched"] += 1
        except Exception as exc:
            _idle_work_failed("prefetch", exc)
        finally:
            self.prefetches.finish(ticket)
            if mine is not None:
                mine.done.set()  # a request waiting for it looks in the memory now
                if self._ahead.get(snap.uri) is mine:
                    del self._ahead[snap.uri]

    # -- explain and refactor -------------------------------------------------------------------

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
        snap = self.snapshot(uri)
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
        if self.engine is None or not self.models_ready.is_set():
            raise BadRequest("models are still loading; try again in a moment")
        if self.settings.remote is None:  # a remote in front loads it only if it falls back
            await self.ensure_loaded(STANDARD)  # else the fast model answers (the fallback)
        result = await self.in_model_thread(
            self.engine.generate,
            task,
            "",
            config,
            fast_mode=self.settings.fastMode,
            cancel=cancel,
            on_text=on_text,
            pause=self.gate.pauser(cancel),
            messages=chat,
        )
        if result.fallback and self.settings.remote and result.variant != REMOTE:
            self.tell_once(
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
        result = await self.chat(Task.EXPLAIN, chat, EXPLAIN_CONFIG, on_text, cancel)
        self.counts["explains"] += 1
        cancelled = result.finish is Finish.CANCELLED
        return {"markdown": result.text, "model": result.model_id, "cancelled": cancelled}

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
            self.counts["refactors_refused"] += 1
            self.tell(f"fastcomplete: rewrite not applied: {verdict}", "info")
            return Rewrite(result.model_id, None, verdict, False)
        return Rewrite(result.model_id, rewritten, None, False)

    # -- commands -------------------------------------------------------------------------------

    def toggle_fast_mode(self) -> dict[str, bool]:
        self.apply_settings({"fastMode": not self.settings.fastMode})
        return {"fastMode": self.settings.fastMode}

    def stats(self) -> dict[str, Any]:
        engine = self.engine.stats() if self.engine is not None else {}
        reasons = {k.split(".", 1)[1]: n for k, n in self.counts.items() if k.startswith("empty.")}
        return {
            "fastMode": self.settings.fastMode,
            "modelsReady": self.models_ready.is_set(),
            "state": self.state[0],
            "server": {k: n for k, n in self.counts.items() if not k.startswith("empty.")},
            "emptyReasons": reasons,
            "index": self.indexer.stats(),
            "prefill": {
                "runs": self.prefill.prefills,
                "interruptions": self.prefill.interruptions,
            },
            "acceptance": self.acceptance(),
            **engine,
        }

    def accepted(self, args: Sequence[Any]) -> None:
        """A whole suggestion was accepted (its item's command): [{uri, model, chars, line?,
        character?, text?}]; with where and what, its retention is watched too."""
        self.counts["accepted"] += 1
        arg = args[0] if args and isinstance(args[0], dict) else {}
        model = arg.get("model")
        if isinstance(model, str):
            self.counts[f"accepted.{model}"] += 1
        chars = arg.get("chars")
        if isinstance(chars, int) and chars > 0:
            self.counts["accepted_chars"] += chars
        self._watch(arg.get("uri"), arg.get("line"), arg.get("character"), arg.get("text"), "full")

    def partially_accepted(
        self,
        kind: str,
        length: int,
        uri: Any = None,
        line: Any = None,
        character: Any = None,
        text: Any = None,
    ) -> None:
        """Part of a suggestion was accepted (a word or a line), at (line, character) when given;
        counted locally only."""
        kind = kind if kind in ("word", "line") else "other"
        self.counts[f"accepted_partial.{kind}"] += 1
        self.counts["accepted_partial_chars"] += max(0, length)
        self._watch(uri, line, character, text, kind)

    def _watch(self, uri: Any, line: Any, character: Any, text: Any, kind: str) -> None:
        """Start the retention checks for an accepted text, when the client said where it went."""
        if not (isinstance(uri, str) and isinstance(text, str) and text):
            return
        doc = self.documents.get(uri)
        if doc is None or not isinstance(line, int) or not isinstance(character, int):
            return
        try:
            start = offset_at(doc.text, line, character)
        except PositionError:
            return
        entry = self.retention.track(doc.uri, doc.text, start, text, kind)
        self.spawn(self._check_retention(entry, tuple(self.settings.retentionChecksS)))

    async def _check_retention(self, entry: Accepted, checks_s: tuple[int, ...]) -> None:
        waited = 0.0
        try:
            for check in sorted(checks_s):
                await asyncio.sleep(check - waited)
                waited = check
                doc = self.documents.get(entry.uri)
                if doc is None or not self.retention.watching(entry):
                    self.counts[f"retention.{check}s.unmeasured"] += 1
                    continue
                self.counts[f"retention.{check}s.accepted_chars"] += len(entry.text)
                self.counts[f"retention.{check}s.retained_chars"] += self.retention.measure(
                    entry, doc.text
                )
        finally:
            self.retention.forget(entry)

    def acceptance(self) -> dict[str, Any]:
        """Full, partial and retained acceptance, from the counts (all local)."""
        retention = {}
        for check in sorted(self.settings.retentionChecksS):
            accepted = self.counts[f"retention.{check}s.accepted_chars"]
            kept = self.counts[f"retention.{check}s.retained_chars"]
            retention[f"{check}s"] = {
                "acceptedChars": accepted,
                "retainedChars": kept,
                "share": round(kept / accepted, 3) if accepted else None,
            }
        return {
            "full": self.counts["accepted"],
            "fullChars": self.counts["accepted_chars"],
            "partialWord": self.counts["accepted_partial.word"],
            "partialLine": self.counts["accepted_partial.line"],
            "partialChars": self.counts["accepted_partial_chars"],
            "retention": retention,
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
                view = self._cursor_view(snap, int(position["line"]), int(position["character"]))
                out["prompt"] = self.plan(snap, view).prompt
            except (KeyError, TypeError, ValueError, PositionError) as exc:
                raise BadRequest(f"{uri}: a position inside the document ({exc})") from exc
        return out
