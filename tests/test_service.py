"""The completion service without any LSP client, on real models (the tiny one and SmolLM2):
what needs real tokens and real timing. The policy's scenarios run once, on the scripted engine,
in tests/test_inline_policy.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from inference.engine import EngineConfig, _healed
from lsp_server.config.tuning import NEAR_CHARS
from lsp_server.errors import BadRequest
from lsp_server.inline.answers import Origin
from lsp_server.inline.memory import Remembered
from lsp_server.service import CompletionService

URI = "file:///w/calc.py"
SOURCE = "import math\n\n\ndef hypot(a, b):\n    return math.sqrt(a * a + b * b"


@pytest.fixture
def service(tiny_model: Path) -> CompletionService:
    told: list[tuple[str, str]] = []
    config = EngineConfig(
        fast_dir=tiny_model / "fast", standard_dir=tiny_model / "standard", cache_dir=None
    )
    svc = CompletionService(lambda message, level: told.append((message, level)), config)
    svc.told = told  # type: ignore[attr-defined]
    svc.apply_settings({"debounceMs": 0, "maxTokens": 8, "showGate": False})
    return svc


# What the real model completes with more than a bracket: `["price"]` or similar.
ITEMS = (
    "def total_price(items: list[dict]) -> float:\n"
    "    total = 0.0\n"
    "    for item in items:\n"
    "        total += item"
)


@pytest.fixture
def real_service(real_model: Path) -> CompletionService:
    """The real model: a suggestion worth typing through (the tiny model's loop is dropped)."""
    config = EngineConfig(
        fast_dir=real_model / "fast", standard_dir=real_model / "standard", cache_dir=None
    )
    svc = CompletionService(lambda message, level: None, config)
    svc.apply_settings({"debounceMs": 0, "maxTokens": 16, "showGate": False})
    return svc


async def _ready(svc: CompletionService) -> None:
    reports: list[tuple[str, int | None]] = []
    await svc.load_models(lambda message, pct: reports.append((message, pct)))
    assert reports[-1] == ("models loaded", None) and svc.models.ready.is_set()


async def test_complete_counts_and_answers_on_snapshots(real_service: CompletionService) -> None:
    service = real_service
    await _ready(service)
    service.open(URI, SOURCE, 1, "python")
    answer = await service.complete(URI, 4, 34)
    stats = service.stats()["server"]
    assert stats["requests"] == 1 and stats["answered"] == 1, stats
    assert answer is not None
    assert (answer.line, answer.character) == (4, 34) and answer.text
    assert answer.result.variant == "fast"
    # A character past the line's end anchors at the line's end: the same place, the same answer.
    late = await service.complete(URI, 4, 99)
    assert late is not None and (late.line, late.character, late.text) == (4, 34, answer.text)


def test_a_bug_in_a_handler_is_answered_and_told_once() -> None:
    """The transport answers -32603 for an exception of our own and tells the user, once."""
    from concurrent.futures import Future

    from lsp_server.protocol.transport import INTERNAL, Server

    server = Server(CompletionService())
    told: list[str] = []
    server.service.notices.notify = lambda message, level: told.append(message)
    sent: list[dict] = []
    server.protocol._send_response = lambda msg_id, **kw: sent.append(kw)  # type: ignore[method-assign]
    for msg_id in (1, 2):
        future: Future = Future()
        future.set_exception(TypeError("a bug of ours"))
        server.protocol._send_handler_result(future, msg_id=msg_id)
    assert told == [INTERNAL] and len(sent) == 2
    assert all(kw["error"].code == -32603 for kw in sent)
    refused: Future = Future()
    refused.set_exception(BadRequest("unknown document"))
    server.protocol._send_handler_result(refused, msg_id=3)
    assert sent[-1]["error"].code == -32602 and told == [INTERNAL]


def _edit(service: CompletionService, version: int, line: int, char: int, text: str) -> None:
    at = types.Position(line, char)
    edit = types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)
    service.change(URI, version, [edit])


def _model_requests(service: CompletionService) -> int:
    return sum(m["requests"] for m in service.stats()["models"].values())


async def _idle(service: CompletionService) -> None:
    """Wait for the background work (the prefill, prefetches) to finish."""
    while service._background or service.idle.prefill.pending:
        await asyncio.gather(*list(service._background))
        await service.idle.prefill.settled()


async def test_a_cold_prompt_is_answered_from_the_nearest_lines(
    service: CompletionService,
) -> None:
    await _ready(service)
    body = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n\n" for i in range(80))
    text = body + "def g(a, b):\n    return a"
    service.open(URI, text, 1, "python")
    service.idle.prefill.forget(URI)  # no open-time prefill: the first ask finds the prompt cold
    service.apply_settings({"coldPrefillMs": 10, "contextTokens": 1024})
    snap = service.snapshot(URI)
    line = text.count("\n")
    view = service.planner.cursor_view(snap, line, 12)
    plan = service.planner.plan(snap, view, cold_ok=True)
    assert plan.deferred is not None and plan.deferred.deferred is None
    assert plan.prompt.endswith("def g(a, b):\n    return a")
    assert len(plan.tokens.ids) < len(plan.deferred.tokens.ids) // 4
    await service.complete(URI, line, 12)
    assert service.stats()["server"]["short_context"] == 1
    await _idle(service)  # the whole prompt was prefilled in the background
    again = service.planner.plan(service.snapshot(URI), view, cold_ok=True)
    assert again.deferred is None and again.prompt == plan.deferred.prompt
    service.apply_settings({"coldContext": False})
    service.planner.above_window = type(service.planner.above_window)()
    assert service.planner.plan(snap, view, cold_ok=True).deferred is None


async def test_the_cursor_resting_warms_its_prompt(service: CompletionService) -> None:
    await _ready(service)
    service.open(URI, SOURCE, 1, "python")
    await _idle(service)
    service.engine.router.loaded("fast").pool.clear()
    warmed = service.stats()["events"].get("warmups", 0)
    service.focus(URI, 4, 20)
    service.focus("file:///w/not-open.py", 0, 0)  # ignored: not a document the server has
    await _idle(service)
    assert service.stats()["server"]["focus"] == 2
    assert service.stats()["events"]["warmups"] == warmed + 1
    snap = service.snapshot(URI)
    plan = service.planner.plan(snap, service.planner.cursor_view(snap, 4, 20))
    model = service.engine.router.loaded("fast")
    # What the request will run: healed at the cursor (`sqrt|`), as the warm-up prefilled it.
    healed, config = _healed(model, list(plan.tokens.ids), plan.config)
    assert config.constraint == "sqrt" and len(healed) == len(plan.tokens.ids) - 1
    assert model.pool.cached_tokens(healed) == len(healed)


@pytest.mark.real_model
async def test_accepting_before_the_next_suggestion_is_ready_waits_for_it(
    real_service: CompletionService,
) -> None:
    await _ready(real_service)
    real_service.open(URI, ITEMS, 1, "python")
    shown = await real_service.complete(URI, 3, 21)
    assert shown is not None
    for _ in range(1000):  # accept as soon as the prefetch has started (it takes ~30 ms)
        if URI in real_service.idle.ahead:
            break
        await asyncio.sleep(0.001)
    assert URI in real_service.idle.ahead
    _edit(real_service, 2, 3, 21, shown.text)  # accepted at once
    after = await real_service.complete(URI, 3, 21 + len(shown.text))
    stats = real_service.stats()["server"]
    assert after is not None and stats["prefetch_hits"] == 1 and stats["prefetched"] == 1
    assert real_service.idle.ahead == {}


def test_switching_fast_mode_forgets_what_the_other_model_suggested(
    service: CompletionService,
) -> None:
    service.open(URI, SOURCE, 1, "python")
    service.memory.remember(URI, Remembered(SOURCE, "", " * 2", Origin.MODEL, None))
    assert service.memory.find(URI, SOURCE, len(SOURCE)) is not None
    service.toggle_fast_mode()
    assert service.memory.find(URI, SOURCE, len(SOURCE)) is None


def _cached(service: CompletionService, line: int, character: int) -> tuple[int, int]:
    """(tokens the KV cache holds of the prompt a request at (line, character) would run, its
    length)."""
    snap = service.snapshot(URI)
    plan = service.planner.plan(snap, service.planner.cursor_view(snap, line, character))
    model = service.engine.router.loaded("fast")
    healed, _ = _healed(model, list(plan.tokens.ids), plan.config)
    return model.pool.cached_tokens(healed), len(healed)


async def test_a_plain_client_warms_where_it_opens_and_types(service: CompletionService) -> None:
    """No fastcomplete/didFocus: didOpen (here before the model was loaded: when it is) and each
    didChange aim the prefill."""
    half = "import math\n\n\ndef hypot(a, b):\n    return math.sqrt(a * a +\n\n\nprint(1)\n"
    service.open(URI, half, 1, "python")
    await _ready(service)
    await _idle(service)
    assert service.stats()["prefill"]["runs"] == 1
    cached, length = _cached(service, 4, 28)  # the unfinished line's end, not the file's
    assert cached == length
    service.engine.router.loaded("fast").pool.clear()
    _edit(service, 2, 6, 0, "x = hypot(3, ")
    await _idle(service)
    cached, length = _cached(service, 6, 13)
    assert cached == length and service.stats()["prefill"]["runs"] == 2
    assert service.stats()["server"].get("focus", 0) == 0


async def test_a_focus_sent_while_the_model_loads_is_where_it_warms(
    service: CompletionService,
) -> None:
    """An editor opened on a file sends didOpen and its focus before the model is loaded: the
    prefill starts at that focus once the model is ready, not at didOpen's guess (the
    unfinished line), and the prompt there is whole when the person asks."""
    half = "import math\n\n\ndef hypot(a, b):\n    return math.sqrt(a * a +\n\n\nprint(1)\n"
    service.open(URI, half, 1, "python")
    service.focus(URI, 7, 5)  # inside `print(1)`, far from the unfinished line 4
    await _ready(service)
    await _idle(service)
    cached, length = _cached(service, 7, 5)
    assert cached == length
    ready = service.stats()["prefill"]["ready"]
    assert [(r["uri"], r["line"]) for r in ready] == [(URI, 7)]
    assert ready[0]["runs"] == 1 and ready[0]["ready_s"] >= ready[0]["warm_s"] > 0


async def test_the_prefill_outlives_the_requests_typing_cancels(
    service: CompletionService,
) -> None:
    """Each key's request is cancelled by the next key (as VS Code does); the whole prompt at
    the newest cursor is prefilled all the same, with no request left to ask for it."""
    await _ready(service)
    body = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n\n" for i in range(40))
    service.open(URI, body, 1, "python")
    service.idle.prefill.forget(URI)
    service.engine.router.loaded("fast").pool.clear()
    line = body.count("\n")
    pending: asyncio.Task | None = None
    for i, ch in enumerate("total = f1(2"):
        _edit(service, i + 2, line, i, ch)
        if pending is not None:
            pending.cancel()
        pending = asyncio.ensure_future(service.complete(URI, line, i + 1))
        await asyncio.sleep(0.005)
    assert pending is not None
    pending.cancel()
    await asyncio.gather(pending, return_exceptions=True)
    await _idle(service)
    cached, length = _cached(service, line, 12)
    # All of it but the few last keys' tokens, which the next request computes faster than the
    # prefill could plan them (NEAR_CHARS).
    assert length - cached <= NEAR_CHARS + 1
    assert cached > length - len("total = f1(2") - 2
