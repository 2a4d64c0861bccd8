"""The whole prompt where the person is, prefilled in the background until the KV cache holds it.

Every standard LSP event says where the person is: didOpen (a guess: an unfinished construct,
else the end), each didChange (where the edit ends) and each completion request (its position).
Our clients' fastcomplete/didFocus is a hint that comes sooner, not a requirement. The newest
event sets the aim. Completions come first: while one runs its model work the prefill stands
aside (stopped at its next chunk; the KV slot keeps what it computed) and it resumes toward the
newest aim as soon as none runs. So a request cancelled by the next key cancels its answer, never
the prefill that later requests need, and a person who types steadily still gets the whole
prompt cached: each new aim shares all but the last few tokens with the one before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass

from tree_sitter import Tree

from lsp_server.completion.plan import CompletionPlan
from lsp_server.config.tuning import NEAR_CHARS, NEAR_LINES, T_SETTLE_S
from lsp_server.text.syntax import tree_issues

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Aim:
    """Where the whole prompt should be prefilled: a position in one version of a document."""

    uri: str
    version: int
    line: int
    character: int  # UTF-16


@dataclass
class Readiness:
    """How one aim's whole prompt got cached: from the moment it was aimed at to done, and where
    that time went (planning, prefilling on the model thread, the rest waiting)."""

    uri: str
    line: int
    since: float  # perf_counter when aimed at
    ready_s: float | None = None
    plans: int = 0
    plan_s: float = 0.0
    runs: int = 0
    warm_s: float = 0.0

    def as_json(self) -> dict[str, object]:
        out = asdict(self)
        del out["since"]
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


Plan = Callable[[Aim], Awaitable[CompletionPlan | None]]  # the whole plan there; None: nothing
Warm = Callable[[CompletionPlan, threading.Event], Awaitable[None]]  # prefill it until cancelled


def opened_at(text: str, tree: Tree | None) -> int:
    """Where a person who just opened `text` most likely works: the end of the first line with
    an unfinished construct (a line half written), else the end of the document, whose prompt
    starts every shorter one in a file that fits the budget."""
    issues = tree_issues(tree) if tree is not None else []
    if not issues:
        return len(text)
    row = min(issue.line for issue in issues)
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:row]) + len(lines[row].rstrip("\r"))


def _continues(older: Aim, aim: Aim) -> bool:
    """Whether `aim` is where typing from `older` leads: same document, a few lines away."""
    return older.uri == aim.uri and abs(aim.line - older.line) <= NEAR_LINES


def _near(warmed: Aim | None, aim: Aim) -> bool:
    """Whether `aim` is a few characters on from `warmed` on its line: the prompt there differs
    in a few tokens, which the request at `aim` computes in less time than a plan costs."""
    return (
        warmed is not None
        and warmed.uri == aim.uri
        and warmed.line == aim.line
        and 0 <= aim.character - warmed.character <= NEAR_CHARS
    )


class BackgroundPrefill:
    """One aim at a time, the newest; a loop on the event loop plans and prefills it through the
    service's callables (which run the model work on a worker thread)."""

    def __init__(self, plan: Plan, warm: Warm) -> None:
        self._plan = plan
        self._warm = warm
        self._aim: Aim | None = None
        self._planned: tuple[Aim, CompletionPlan] | None = None  # kept across interruptions
        self._not_before = 0.0  # event-loop time before which the aim waits
        self._done: Aim | None = None  # the last aim whose whole prompt is cached
        self._warmed: Aim | None = None  # the last plan prefilled to its end (maybe not the aim)
        self._foreground = 0  # completions running model work
        self._cancel: threading.Event | None = None  # the prefill in flight
        self._working = False  # planning or prefilling on a worker thread now
        self._waiters: list[asyncio.Future[None]] = []  # woken by the next change
        self._task: asyncio.Task | None = None
        self.prefills = 0  # prefills run (each resumption counts)
        self.interruptions = 0  # prefills stopped by a completion or another document
        self._readiness: Readiness | None = None  # the aim being prefilled, timed
        self.history: deque[Readiness] = deque(maxlen=64)  # the aims whose prompt got cached

    def aim(self, aim: Aim, delay_s: float = T_SETTLE_S) -> None:
        """Prefill the whole prompt at `aim` from `delay_s` on (the event loop thread only).

        A newer aim a few lines from the one being prefilled does not stop that prefill: its
        prompt shares all but the last keys' tokens with the newer one, so it is finished first
        (no new plan per key, which would cost as much as the key's own request) and the newer
        aim's few new tokens follow after `delay_s`. A farther aim stops it."""
        loop = asyncio.get_running_loop()
        if aim == self._aim or aim == self._done:
            return
        if self._aim is None or not _continues(self._aim, aim):
            self._stop()  # elsewhere: what was computed stays in the KV cache
            self._readiness = Readiness(aim.uri, aim.line, time.perf_counter())
        self._aim = aim
        self._not_before = loop.time() + delay_s
        self._poke()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def forget(self, uri: str) -> None:
        """The document closed: aim nowhere in it."""
        if self._aim is not None and self._aim.uri == uri:
            self._stop()
            self._aim = None
        if self._done is not None and self._done.uri == uri:
            self._done = None
        if self._planned is not None and self._planned[0].uri == uri:
            self._planned = None

    @contextlib.asynccontextmanager
    async def step_aside(self) -> AsyncIterator[None]:
        """For a completion's model work: the prefill stops at its next chunk, which the
        completion waits for (two model runs on two cores would slow both), and resumes after."""
        self._foreground += 1
        self._stop()
        try:
            while self._working:
                await self._changed_within(0.05)
            yield
        finally:
            self._foreground -= 1
            self._poke()

    def offer(self, aim: Aim, plan: CompletionPlan) -> None:
        """The whole plan at `aim`, made by a request: the prefill need not plan it again."""
        if self._aim == aim:
            self._planned = (aim, plan)

    def cached_by_request(self, aim: Aim) -> None:
        """A request at `aim` ran the whole prompt to its end: nothing is left to prefill (and an
        older plan of this document is not worth finishing)."""
        self._warmed = aim
        if self._planned is not None and self._planned[0].uri == aim.uri:
            self._planned = None
        if self._aim == aim:
            self._stop()
            self._aim, self._done = None, aim
            self._poke()

    def cached(self, aim: Aim) -> bool:
        return self._done == aim

    @property
    def pending(self) -> bool:
        return self._aim is not None

    async def settled(self) -> None:
        """Until nothing is left to prefill (tests and benchmarks wait for idle work)."""
        while self._aim is not None:
            await self._changed_within(0.05)

    async def until_cached(self, aim: Aim, cancel: threading.Event, timeout_s: float) -> bool:
        """Wait until the whole prompt at `aim` is cached (True), the aim moved elsewhere, the
        request was cancelled or `timeout_s` passed (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not cancel.is_set():
            if self._done == aim:
                return True
            left = deadline - loop.time()
            if left <= 0 or self._aim != aim:
                return False
            await self._changed_within(min(left, 0.05))  # the cancel flag is a thread's
        return False

    def close(self) -> None:
        self._stop()
        self._aim = None
        if self._task is not None:
            self._task.cancel()

    # -- the loop -----------------------------------------------------------------------------

    def _poke(self) -> None:
        """Wake everyone waiting for a change (each re-checks the state it waits on)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _changed_within(self, timeout_s: float | None) -> None:
        """Until the next change or `timeout_s`. A future per wait, not an asyncio.Event: a set
        event lets every later wait return without yielding (a waiting loop would spin and
        starve the event loop), and asyncio.wait_for in Python 3.11 can swallow a cancellation."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None
        if timeout_s is not None:
            timer = loop.call_later(timeout_s, lambda: waiter.done() or waiter.set_result(None))
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _stop(self) -> None:
        if self._cancel is not None and not self._cancel.is_set():
            self._cancel.set()
            self.interruptions += 1

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            aim = self._aim
            if aim is None:
                await self._changed_within(None)
                continue
            wait_s = self._not_before - loop.time()
            if self._foreground or wait_s > 0:
                await self._changed_within(max(wait_s, 0.0) or None)
                continue
            planned = self._planned
            if planned is not None and _continues(planned[0], aim) and planned[0] != self._warmed:
                target = planned[0]  # unfinished, and typing on from it: finish it first
            elif _near(self._warmed, aim):
                self._done, self._aim = aim, None  # its own request computes the few tokens left
                self._record_ready()
                self._poke()
                continue
            else:
                target, planned = aim, None
            cancel = self._cancel = threading.Event()
            self._working = True
            try:
                plan = await self._plan_and_warm(aim, target, planned, cancel)
            except asyncio.CancelledError:
                cancel.set()  # the server is closing: the worker thread stops at its next chunk
                raise
            except Exception as exc:  # idle work never takes the server down
                log.debug("background prefill at %s skipped: %s", aim, exc)
                plan = None
            finally:
                self._cancel = None
                self._working = False
                self._poke()
            if cancel.is_set():
                continue  # a completion or another document took over: resume when it lets us
            if plan is not None:
                self._warmed = target
            if self._aim == target:
                self._done = target if plan is not None else None
                self._aim = None
                if plan is not None:
                    self._record_ready()
            self._poke()

    async def _plan_and_warm(
        self,
        aim: Aim,
        target: Aim,
        planned: tuple[Aim, CompletionPlan] | None,
        cancel: threading.Event,
    ) -> CompletionPlan | None:
        """Plan `aim` (unless `planned` holds the plan of `target`, being finished first) and
        prefill it until done or cancelled; the plan, or None when there is nothing to prefill."""
        timed = self._readiness
        if planned is None:
            started = time.perf_counter()
            plan = await self._plan(aim)
            if timed is not None:
                timed.plans += 1
                timed.plan_s += time.perf_counter() - started
        else:
            plan = planned[1]
        self._planned = (target, plan) if plan is not None else None
        if plan is not None and not cancel.is_set():
            started = time.perf_counter()
            await self._warm(plan, cancel)
            self.prefills += 1
            if timed is not None:
                timed.runs += 1
                timed.warm_s += time.perf_counter() - started
        return plan

    def _record_ready(self) -> None:
        timed, self._readiness = self._readiness, None
        if timed is not None:
            timed.ready_s = time.perf_counter() - timed.since
            self.history.append(timed)
