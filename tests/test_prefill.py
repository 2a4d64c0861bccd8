"""The background prefill's policy with scripted plan and warm steps (no model): it aims at the
newest event, steps aside for completions and resumes, and says when the whole prompt is cached."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lsp_server.inline.prefill import Aim, BackgroundPrefill, opened_at
from lsp_server.text.documents import changed_span
from lsp_server.text.syntax import parse

A = Aim("file:///a.py", 1, 10, 4)
B = Aim("file:///a.py", 2, 12, 0)  # two lines down: typed on
C = Aim("file:///c.py", 1, 3, 0)
FAR = Aim("file:///a.py", 1, 200, 0)  # the same document, far from A: a jump, not typing


class Script:
    """Plans are the aims themselves; a warm runs `chunks` steps of `step_s`, stopping when
    cancelled, and the chunks done survive (as a KV slot keeps them)."""

    def __init__(self, chunks: int = 5, step_s: float = 0.01) -> None:
        self.chunks, self.step_s = chunks, step_s
        self.planned: list[Aim] = []
        self.done: dict[Aim, int] = {}
        self.cancelled = 0

    async def plan(self, aim: Aim) -> Any:
        self.planned.append(aim)
        return aim

    async def warm(self, plan: Any, cancel: threading.Event) -> None:
        while self.done.get(plan, 0) < self.chunks:
            if cancel.is_set():
                self.cancelled += 1
                return
            await asyncio.sleep(self.step_s)
            self.done[plan] = self.done.get(plan, 0) + 1


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_an_aim_is_prefilled_to_its_end() -> None:
    async def go() -> None:
        script = Script()
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A)
        assert await prefill.until_cached(A, threading.Event(), 2.0)
        assert script.done[A] == script.chunks and script.planned == [A]
        prefill.close()

    run(go())


def test_a_completion_pauses_the_prefill_and_it_resumes_without_planning_again() -> None:
    async def go() -> None:
        script = Script(chunks=20)
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 0.0)
        await asyncio.sleep(0.05)
        async with prefill.step_aside():
            await asyncio.sleep(0.01)  # the chunk in flight ends
            paused_at = script.done[A]
            await asyncio.sleep(0.1)
            assert script.done[A] == paused_at, "the prefill ran while a completion did"
            assert not prefill.cached(A)
        assert await prefill.until_cached(A, threading.Event(), 2.0)
        assert script.cancelled == 1 and prefill.interruptions == 1
        assert script.planned == [A]  # the plan survives the interruption
        prefill.close()

    run(go())


def test_a_newer_aim_in_the_same_document_finishes_the_older_plan_first() -> None:
    """Typing moves the aim every key: the plan in flight is finished (it shares all but the
    last keys' tokens), not thrown away and planned again per key."""

    async def go() -> None:
        script = Script(chunks=10)
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 0.0)
        await asyncio.sleep(0.03)
        prefill.aim(B, 0.3)  # a later key does not stop what already started
        assert not await prefill.until_cached(A, threading.Event(), 0.5)  # it moved on
        await asyncio.sleep(0.15)
        assert script.done[A] == script.chunks and script.planned == [A], "A is finished first"
        assert await prefill.until_cached(B, threading.Event(), 1.0)  # B after its delay
        assert script.planned == [A, B]
        assert prefill.interruptions == 0
        prefill.close()

    run(go())


def test_another_document_or_a_far_line_stops_the_prefill_at_once() -> None:
    async def go(elsewhere: Aim) -> None:
        script = Script(chunks=10)
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 0.0)
        await asyncio.sleep(0.03)
        prefill.aim(elsewhere, 0.0)
        assert await prefill.until_cached(elsewhere, threading.Event(), 2.0)
        assert script.done[A] < script.chunks and script.planned == [A, elsewhere]
        assert not prefill.cached(A)
        prefill.close()

    run(go(C))
    run(go(FAR))


def test_a_few_characters_on_along_the_line_are_left_to_the_request() -> None:
    async def go() -> None:
        script = Script()
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 0.0)
        assert await prefill.until_cached(A, threading.Event(), 2.0)
        near = Aim(A.uri, A.version + 3, A.line, A.character + 3)
        prefill.aim(near, 0.0)
        assert await prefill.until_cached(near, threading.Event(), 2.0)
        far = Aim(A.uri, A.version + 4, A.line + 1, 0)
        prefill.aim(far, 0.0)
        assert await prefill.until_cached(far, threading.Event(), 2.0)
        assert script.planned == [A, far]  # the near one needed no plan
        prefill.close()

    run(go())


def test_waiting_for_the_prefill_ends_when_the_request_is_cancelled() -> None:
    async def go() -> None:
        script = Script(chunks=1000)
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 0.0)
        cancel = threading.Event()
        asyncio.get_running_loop().call_later(0.05, cancel.set)
        started = asyncio.get_running_loop().time()
        assert not await prefill.until_cached(A, cancel, 5.0)
        assert asyncio.get_running_loop().time() - started < 1.0
        prefill.close()

    run(go())


def test_a_request_that_ran_the_whole_prompt_leaves_nothing_to_prefill() -> None:
    async def go() -> None:
        script = Script()
        prefill = BackgroundPrefill(script.plan, script.warm)  # type: ignore[arg-type]
        prefill.aim(A, 1.0)
        prefill.cached_by_request(A)
        assert prefill.cached(A)
        await asyncio.sleep(0.05)
        assert script.planned == []
        prefill.close()

    run(go())


def test_an_opened_file_is_aimed_at_its_unfinished_line_else_its_end() -> None:
    clean = "def area(r):\n    return 3.14 * r * r\n\n\nprint(area(2))\n"
    assert opened_at(clean, parse("python", clean)) == len(clean)
    half = "import os\n\n\ndef käse(path):\n    return os.path.join(path,\n\n\nprint(1)\n"
    at = opened_at(half, parse("python", half))
    assert half[:at].endswith("os.path.join(path,")
    assert opened_at(half, None) == len(half)  # no grammar: the end


def test_a_whole_document_change_says_where_the_text_changed() -> None:
    assert changed_span("abc xyz", "abc 12 xyz") == (4, 4)
    assert changed_span("héllo", "héllo!") == (5, 5)
    assert changed_span("same", "same") == (4, 4)
    assert changed_span("aaaa", "aa") == (2, 4)
