"""The inline-completion policy, one request at a time, in named steps: resolve the request,
answer from a suggestion being typed through, wait out the debounce (stale requests drop), take
a snapshot, run the model on it, and answer (or count why not)."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass

from inference.engine import EngineResult
from inference.generate import Finish
from inference.router import STANDARD, RoutingError
from lsp_server.completion.plan import CompletionPlan
from lsp_server.completion.planner import Planner, View
from lsp_server.completion.run import Completion
from lsp_server.config.tuning import MAX_ALTERNATIVE_ITEMS, T_WHOLE_WAIT_S
from lsp_server.errors import BadRequest
from lsp_server.inline.answers import Answer, Selected
from lsp_server.inline.idle_work import IdleWork
from lsp_server.inline.memory import Match, Remembered
from lsp_server.inline.parts import Parts
from lsp_server.inline.prefill import Aim
from lsp_server.inline.rejections import place_of
from lsp_server.inline.show_gate import Put, features
from lsp_server.serving.scheduler import LatestWins, Ticket
from lsp_server.text.documents import (
    Document,
    Snapshot,
    snapshot_of,
    unknown_document,
    with_insertion,
)
from lsp_server.text.positions import PositionError, clamp_character, offset_at, position_at

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ask:
    """One request, resolved: the document as it was asked in, and the text and cursor it is
    answered on (with the suggest widget's selected item in place, when there is one)."""

    uri: str  # as the client sent it
    doc: Document  # the live document: its version moves on with each edit
    version: int
    text: str
    line: int
    character: int  # UTF-16
    invoked: bool
    aim: Aim  # where the person is (before any selected item)
    where: str
    inserted: tuple[int, str, int] | None = None  # the selected item: (start, text, end)


@dataclass(frozen=True)
class Shown:
    """A suggestion about to be shown, as the show gate reads it."""

    uri: str
    text: str  # the document
    language_id: str
    offset: int  # where it would show
    suggestion: str
    result: EngineResult | None  # what made it (its tokens' log-probabilities)
    where: str  # for the log
    origin: str = "model"  # or "prefetch", "type_through"
    typed: int = 0  # characters of it typed through


class InlinePolicy:
    def __init__(self, parts: Parts, planner: Planner, idle: IdleWork) -> None:
        self._settings = parts.settings
        self._documents = parts.documents
        self._models = parts.models
        self._memory = parts.memory
        self._rejections = parts.rejections
        self._show_gate = parts.show_gate
        self._gate = parts.gate
        self._notices = parts.notices
        self._telemetry = parts.telemetry
        self._spawn = parts.spawn
        self._planner = planner
        self._idle = idle
        self.latest = LatestWins()

    async def complete(
        self,
        uri: str,
        line: int,
        character: int,
        invoked: bool = False,
        selected: Selected | None = None,
    ) -> Answer | None:
        """The completion at (line, UTF-16 character), or None (disabled, not ready, superseded,
        empty: Telemetry.no_answer counts why). Raises BadRequest for an unknown document or a
        position outside it. `invoked`: asked for explicitly, so up to MAX_ALTERNATIVE_ITEMS items,
        ranked, freshly computed (no type-through, no debounce). `selected`: the suggest widget's
        item; the answer is then anchored after it, in the document as if it were accepted."""
        counts = self._telemetry.counts
        counts["requests"] += 1
        counts["invoked"] += invoked
        ask = self._resolve(uri, line, character, invoked, selected)
        settings = self._settings()
        if settings.showGate:
            self._show_gate.observe(ask.doc.uri, ask.doc.text)  # what became of the last ones
        found = None
        if not invoked and settings.typeThrough and settings.enabled_for(ask.doc.language_id):
            found = await self._typed_through(ask)
        if found is None or not found.typed:
            self._asked_here(ask)
        if found is not None:
            # No debounce, no model: the rest of what the editor shows. A rest the show gate
            # holds back goes to the model instead, which now sees what was typed.
            answer, held = self._shown_again(ask, found)
            if not (held and found.typed):
                return answer
        self._idle.prefetches.cancel(ask.doc.uri)
        ticket = self.latest.begin(ask.doc.uri)
        try:
            snap = await self._settled(ask, ticket)
            if snap is None:
                return None
            plan, done = await self._run(ask, snap, ticket)
        except PositionError as exc:
            counts["bad_position"] += 1
            raise BadRequest(f"{uri}: {exc}") from exc
        except asyncio.CancelledError:
            ticket.cancel.set()  # the worker thread stops at its next forward pass
            counts["cancelled"] += 1
            self._telemetry.no_answer("cancelled", ask.where)
            raise
        except RoutingError as exc:
            counts["errors"] += 1
            self._telemetry.no_answer("error", ask.where)
            self._notices.tell_once(f"fastcomplete: no model could complete: {exc}", "error")
            self._spawn(self._models.ensure_loaded(STANDARD))  # the fallback for the next one
            return None
        finally:
            self.latest.finish(ticket)
        answer = self._answer(snap, ask, done, ticket.cancel)
        if answer is not None and plan.deferred is None and settings.prefetch:
            self._spawn(self._idle.prefetch(snap, answer))
        return answer

    # -- the steps, in order --------------------------------------------------------------------

    def _resolve(
        self, uri: str, line: int, character: int, invoked: bool, selected: Selected | None
    ) -> Ask:
        doc = self._documents.get(uri)
        if doc is None:
            raise unknown_document(uri)
        aim = Aim(doc.uri, doc.version, line, character)
        self._idle.aim(aim)  # where the person is, whatever becomes of this request
        where = f"{doc.uri}:{line}:{character}"
        if selected is None:
            return Ask(uri, doc, doc.version, doc.text, line, character, invoked, aim, where)
        self._telemetry.counts["after_selected_item"] += 1
        try:
            start, end = selected.span(doc.text)
        except PositionError as exc:
            self._telemetry.counts["bad_position"] += 1
            raise BadRequest(f"{uri}: the selected item's range: {exc}") from exc
        text = doc.text[:start] + selected.text + doc.text[end:]
        line, character = position_at(text, start + len(selected.text))
        inserted = (start, selected.text, end)
        return Ask(uri, doc, doc.version, text, line, character, invoked, aim, where, inserted)

    async def _typed_through(self, ask: Ask) -> Match | None:
        """The rest of a remembered suggestion the person is typing through (or that a prefetch
        made after an accepted one), waiting for a prefetch of exactly this place if one runs."""
        found = self._remembered(ask)
        if found is None and await self._idle.until_prefetched(
            ask.doc.uri, ask.text, ask.line, ask.character
        ):
            found = self._remembered(ask)
        return found

    async def _settled(self, ask: Ask, ticket: Ticket) -> Snapshot | None:
        """After the debounce: the snapshot to answer on, or None (superseded, or unservable)."""
        await asyncio.sleep(0 if ask.invoked else self._settings().debounceMs / 1000)
        if not self.latest.is_current(ticket) or ask.doc.version != ask.version:
            self._telemetry.counts["stale_dropped"] += 1
            self._telemetry.no_answer("stale", ask.where)
            return None
        snap = snapshot_of(self._documents, ask.uri)  # one incremental parse of the edits since
        if ask.inserted is not None:
            snap = with_insertion(snap, *ask.inserted)
        reason = self._planner.unservable(snap)
        if reason is None and not ask.invoked:
            quiet = self._planner.quiet_place(snap, ask.line, ask.character)
            reason = f"quiet_{quiet}" if quiet else None
        if reason is None:
            return snap
        self._telemetry.counts[reason] += 1
        self._telemetry.no_answer(reason, ask.where)
        if reason == "refused_binary":
            self._notices.tell_once(
                f"fastcomplete: {ask.uri} holds binary data (NUL bytes): no completions"
            )
        return None

    async def _run(
        self, ask: Ask, snap: Snapshot, ticket: Ticket
    ) -> tuple[CompletionPlan, Completion]:
        view = self._planner.cursor_view(snap, ask.line, ask.character)
        prefill = self._idle.prefill
        # The background prefill stands aside while the model works for this request (not
        # during the debounce: with a key every 90 ms it would get no time at all).
        async with prefill.step_aside():
            with self._gate.foreground():
                candidates = MAX_ALTERNATIVE_ITEMS if ask.invoked else 1
                plan, done = await self._models.run(
                    self._planner.plan_and_run, snap, view, ticket.cancel, True, False, candidates
                )
        if plan.deferred is None:
            if ask.inserted is None and _ran_to_end(done):
                prefill.cached_by_request(ask.aim)
        else:
            # Answered from the nearest lines: the whole prompt goes on prefilling where the
            # person is (for the next key; before any prefetch, which needs it too).
            self._telemetry.counts["short_context"] += 1
            if ask.inserted is None:
                prefill.offer(ask.aim, plan.deferred)
                if _rejected(done):
                    done = await self._from_whole(ask, snap, view, plan.deferred, ticket, done)
        return plan, done

    async def _from_whole(
        self,
        ask: Ask,
        snap: Snapshot,
        view: View,
        whole: CompletionPlan,
        ticket: Ticket,
        short: Completion,
    ) -> Completion:
        """The short prompt gave nothing to show: answer from the whole prompt once the
        background prefill has it (within T_WHOLE_WAIT_S; the next key cancels the wait)."""
        prefill = self._idle.prefill
        if not await prefill.until_cached(ask.aim, ticket.cancel, T_WHOLE_WAIT_S):
            return short
        self._telemetry.counts["whole_after_short"] += 1
        async with prefill.step_aside():
            with self._gate.foreground():
                return await self._models.run(self._planner.run, whole, snap, view, ticket.cancel)

    def _answer(
        self, snap: Snapshot, ask: Ask, done: Completion, cancel: threading.Event
    ) -> Answer | None:
        counts, result = self._telemetry.counts, done.result
        line, character = ask.line, ask.character
        where = f"{snap.uri}:{line}:{character}"
        counts["quality_fallbacks"] += done.syntax_rejected
        counts["standard_retries"] += done.retried_on_standard
        if result is not None and result.finish is Finish.CANCELLED:
            counts["cancelled"] += 1
            self._telemetry.no_answer("cancelled", where)
            return None
        doc = self._documents.get(snap.uri)
        if cancel.is_set() or doc is None or doc.version != snap.version:
            counts["stale_dropped"] += 1  # the document moved on while we generated
            self._telemetry.no_answer("stale", where)
            return None
        counts["cache_hits"] += bool(result and result.cached)
        if not done.text or result is None:
            counts["empty"] += 1
            self._telemetry.no_answer(done.empty_reason or "model_empty", where)
            return None
        counts["answered"] += 1
        if result.fallback:
            self._notices.tell_once(
                f"fastcomplete: completions come from the {result.variant} model for now "
                f"({result.fallback_reason})"
            )
        if self._settings().debug:
            log.info("completion %s -> %r", where, done.text)
        character = clamp_character(snap.text, line, character)
        offset = offset_at(snap.text, line, character)
        limit = 0 if ask.invoked else self._settings().rejectAfterShows  # asked for: answered
        if not self._rejections.offer(place_of(snap.uri, snap.text, offset), done.text, limit):
            counts["rejected_here"] += 1  # passed over here `limit` times: held back
            self._telemetry.no_answer("rejected_here", where)
            return None
        if not ask.invoked and self._held_back(
            Shown(snap.uri, snap.text, snap.language_id, offset, done.text, result, where)
        ):
            return None
        shown = Remembered(snap.text[:offset], snap.text[offset:], done.text, "shown", result)
        self._memory.remember(snap.uri, shown)
        counts["alternatives"] += max(0, len(done.alternatives) - 1)
        counts["reranked"] += done.reranked
        for step in done.trimmed_by:
            counts[f"trimmed.{step}"] += 1
        return Answer(done.text, result, line, character, done.alternatives)

    def _held_back(self, shown: Shown) -> bool:
        """Whether the show gate holds `shown` back (it learns from it either way)."""
        settings = self._settings()
        if not settings.showGate:
            return False
        text, offset = shown.text, shown.offset
        line_start = text.rfind("\n", 0, offset) + 1
        line_end = text.find("\n", offset)
        suffix = text[offset : line_end if line_end >= 0 else len(text)]
        x = features(
            shown.suggestion,
            rest_logprobs(shown.result.logprobs if shown.result else (), shown),
            text[line_start:offset],
            suffix,
            shown.language_id,
            shown.origin == "prefetch",
            shown.typed,
        )
        held = self._show_gate.probability(x) < settings.showGateThreshold
        self._show_gate.put(shown.uri, Put(text[:offset], text[offset:], shown.suggestion, x, held))
        if held:
            self._telemetry.counts["held_back"] += 1
            if shown.origin != "type_through":  # a rest held back goes on to the model
                self._telemetry.no_answer("held_back", shown.where)
        return held

    def _remembered(self, ask: Ask) -> Match | None:
        try:
            offset = offset_at(ask.text, ask.line, ask.character)
        except PositionError:
            return None  # the model path reports it
        return self._memory.find(ask.doc.uri, ask.text, offset)

    def _asked_here(self, ask: Ask) -> None:
        """The person asks here, not typing a suggestion: one shown elsewhere was passed over."""
        try:
            offset = offset_at(ask.text, ask.line, ask.character)
        except PositionError:
            return  # the model path reports it
        self._rejections.asked(place_of(ask.doc.uri, ask.text, offset))

    def _shown_again(self, ask: Ask, found: Match) -> tuple[Answer | None, bool]:
        """A remembered suggestion's rest, and whether the show gate held it back. None when it
        is the whole suggestion again at its place, passed over there `rejectAfterShows` times,
        or when the gate holds it back."""
        if found.typed:
            self._rejections.taken(ask.doc.uri)  # typing it is taking it
        else:
            place = place_of(ask.doc.uri, ask.text, found.item.anchor)
            if not self._rejections.offer(place, found.rest, self._settings().rejectAfterShows):
                self._telemetry.counts["rejected_here"] += 1
                self._telemetry.no_answer("rejected_here", ask.where)
                return None, False
        shown = Shown(
            ask.doc.uri,
            ask.text,
            ask.doc.language_id,
            found.item.anchor + found.typed,
            found.rest,
            found.item.result,
            ask.where,
            "type_through" if found.typed else "prefetch",
            found.typed,
        )
        if self._held_back(shown):
            return None, True
        self._telemetry.counts["answered"] += 1
        self._telemetry.counts["type_through" if found.typed else "prefetch_hits"] += 1
        if self._settings().debug:
            how = "typed through" if found.typed else "prefetched"
            where = f"{ask.doc.uri}:{ask.line}:{ask.character}"
            log.info("completion %s -> %r (%s)", where, found.rest, how)
        character = clamp_character(ask.text, ask.line, ask.character)
        return Answer(found.rest, found.item.result, ask.line, character), False


def rest_logprobs(logprobs: tuple[float, ...], shown: Shown) -> tuple[float, ...]:
    """The log-probabilities of the tokens of what is left to show: for a rest being typed
    through, the tokens after the part typed (placed by characters: the text's tokens are not
    at hand here)."""
    if not shown.typed or not logprobs:
        return logprobs
    whole = shown.typed + len(shown.suggestion)
    return logprobs[min(len(logprobs) - 1, len(logprobs) * shown.typed // whole) :]


def _ran_to_end(done: Completion) -> bool:
    """Whether the request's own prefill finished (so its whole prompt is cached)."""
    result = done.result
    return (
        result is not None
        and result.generation is not None  # not a cache hit: that prefills nothing
        and result.finish is not Finish.CANCELLED
    )


def _rejected(done: Completion) -> bool:
    """A short prompt's answer that came back empty (not cancelled, not timed out)."""
    return not done.text and done.result is not None and done.empty_reason != "cancelled"
