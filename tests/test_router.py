"""Routing, fallback and the circuit breaker, with injected failing models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from inference.errors import ModelFailure, ModelLoadError
from inference.metrics import Metrics
from inference.router import (
    FAST,
    REMOTE,
    STANDARD,
    Route,
    Router,
    RoutingError,
    Task,
    preference,
)

COMPLETION = Route(Task.COMPLETION, (FAST, STANDARD))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _router(fail: set[str], clock: Clock, load_fail: set[str] = frozenset()) -> Router[str]:
    def loader(variant: str):
        def load() -> str:
            if variant in load_fail:
                raise ModelLoadError(f"{variant} model file is corrupt")
            return variant

        return load

    router: Router[str] = Router(
        {FAST: loader(FAST), STANDARD: loader(STANDARD)}, Metrics(), 3, 30.0, clock
    )
    router.fail = fail  # type: ignore[attr-defined]
    return router


def _work(router: Router[str]):
    def work(model: str, variant: str) -> str:
        if variant in router.fail:  # type: ignore[attr-defined]
            raise ModelFailure(f"{variant} exploded in the decode loop")
        return f"served by {model}"

    return work


def test_preferences() -> None:
    assert preference(Task.COMPLETION, fast_mode=True) == (FAST, STANDARD)
    assert preference(Task.COMPLETION, fast_mode=False) == (STANDARD, FAST)
    # A remote endpoint, when configured, stands in front of the local standard model.
    assert preference(Task.EXPLAIN, fast_mode=True) == (REMOTE, STANDARD, FAST)
    assert preference(Task.REFACTOR, fast_mode=True) == (REMOTE, STANDARD, FAST)
    assert preference(Task.COMPLETION, False, remote_completions=True) == (REMOTE, STANDARD, FAST)


def test_fast_failure_falls_back_and_trips_the_breaker() -> None:
    clock = Clock()
    router = _router({FAST}, clock)
    for _ in range(3):
        result, variant, reason = router.run(COMPLETION, _work(router))
        assert (result, variant) == ("served by standard", STANDARD)
        assert reason == "fast: fast exploded in the decode loop"
    assert router.states()[FAST] == "open"
    events = router.metrics.snapshot()["events"]
    assert events["failure.fast"] == 3 and events["breaker_opened.fast"] == 1
    assert events["fallback.fast_to_standard"] == 3
    router.run(COMPLETION, _work(router))  # open: fast not even tried
    assert router.metrics.snapshot()["events"]["breaker_open_skip.fast"] == 1
    assert router.metrics.snapshot()["events"]["failure.fast"] == 3
    # After the cool-down one trial goes through; success closes the breaker.
    clock.now = 31.0
    assert router.states()[FAST] == "half-open"
    router.fail = set()  # type: ignore[attr-defined]
    assert router.run(COMPLETION, _work(router))[1] == FAST
    assert router.states()[FAST] == "closed"


def test_half_open_failure_reopens_at_once() -> None:
    clock = Clock()
    router = _router({FAST}, clock)
    for _ in range(3):
        router.run(COMPLETION, _work(router))
    clock.now = 31.0
    router.run(COMPLETION, _work(router))
    assert router.states()[FAST] == "open"


def test_load_failure_falls_back() -> None:
    router = _router(set(), Clock(), load_fail={FAST})
    _, variant, reason = router.run(COMPLETION, _work(router))
    assert variant == STANDARD and "corrupt" in reason


def test_routes_are_decided_once_with_the_quality_retry() -> None:
    router = _router(set(), Clock())
    route = router.route(Task.COMPLETION, fast_mode=True)
    assert route == COMPLETION and route.preferred == FAST
    assert route.quality_retry(FAST) == Route(Task.COMPLETION, (STANDARD,))
    assert route.quality_retry(STANDARD) is None
    assert router.route(Task.EXPLAIN, fast_mode=True).order == (STANDARD, FAST)  # no remote
    assert router.route(Task.EXPLAIN, True).quality_retry(FAST) is None


def test_a_bug_in_our_code_surfaces_and_trips_no_breaker() -> None:
    router = _router(set(), Clock())

    def buggy(model: str, variant: str) -> str:
        raise TypeError("a bug in healing, not the model's fault")

    for _ in range(5):
        with pytest.raises(TypeError, match="a bug in healing"):
            router.run(COMPLETION, buggy)
    assert router.states() == {FAST: "closed", STANDARD: "closed"}
    assert "failure.fast" not in router.metrics.snapshot()["events"]


def test_a_model_still_loading_is_skipped_by_completions_only() -> None:
    import threading

    started, release = threading.Event(), threading.Event()

    def slow_standard() -> str:
        started.set()
        release.wait(10)
        return STANDARD

    router: Router[str] = Router({FAST: lambda: FAST, STANDARD: slow_standard}, Metrics())
    loading = threading.Thread(target=router.model, args=(STANDARD,))
    loading.start()
    started.wait(10)
    standard_first = Route(Task.COMPLETION, (STANDARD, FAST))
    # The completion does not wait for the load: the fast model serves at once.
    assert router.run(standard_first, _work_ok)[1:] == (FAST, "standard: still loading")
    release.set()
    loading.join()
    assert router.run(standard_first, _work_ok)[1] == STANDARD


def _work_ok(model: str, variant: str) -> str:
    return model


def test_everything_failing_is_a_clear_error() -> None:
    router = _router({FAST, STANDARD}, Clock())
    with pytest.raises(RoutingError, match=r"fast exploded.*standard exploded"):
        router.run(COMPLETION, _work(router))


def test_engine_falls_back_from_a_truncated_fast_model(tiny_model: Path, tmp_path: Path) -> None:
    broken = tmp_path / "fast"
    shutil.copytree(tiny_model / "fast", broken)
    model_file = broken / "model.onnx"
    model_file.write_bytes(model_file.read_bytes()[:1000])
    engine = Engine(
        EngineConfig(fast_dir=broken, standard_dir=tiny_model / "standard", cache_dir=None)
    )
    result = engine.generate(Task.COMPLETION, "def add(a, b):", fast_mode=True)
    assert result.variant == STANDARD and result.fallback and result.text
    stats = engine.stats()
    assert stats["events"]["fallback.fast_to_standard"] == 1
    assert stats["models"]["tiny-llama/standard"]["requests"] == 1
