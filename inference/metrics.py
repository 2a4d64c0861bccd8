"""Per-model request metrics with p50/p95/p99 over a sliding window; snapshots are plain data.

`percentile` is the project's one definition of a percentile: the server's stats, the GPU
default's measured p95 (models/measure.py), the eval and the benchmarks all report through it.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from inference.tuning import METRICS_WINDOW_REQUESTS


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest rank (q from 0 to 1): the smallest value with a share q of them at or below it.

    Always a value that was measured, never an interpolation: the p95 of 20 or fewer timings is
    the slowest, which is what a latency budget over a handful of runs must hold to.
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("the percentile of no values")
    # Less a hair: 0.55 * 100 is 55.00000000000001 in floating point, one rank too many.
    rank = math.ceil(q * len(ordered) - 1e-9)
    return ordered[max(rank, 1) - 1]


class Window:
    def __init__(self, size: int = METRICS_WINDOW_REQUESTS) -> None:
        self.values: deque[float] = deque(maxlen=size)

    def add(self, value: float) -> None:
        self.values.append(value)

    def percentiles(self) -> dict[str, float | None]:
        if not self.values:
            return {"p50": None, "p95": None, "p99": None, "n": 0}
        values = list(self.values)
        return {
            "p50": percentile(values, 0.50),
            "p95": percentile(values, 0.95),
            "p99": percentile(values, 0.99),
            "n": len(values),
        }


@dataclass
class ModelMetrics:
    counts: Counter = field(default_factory=Counter)
    ttft_ms: Window = field(default_factory=Window)
    tpot_ms: Window = field(default_factory=Window)
    tokens_per_s: Window = field(default_factory=Window)
    total_ms: Window = field(default_factory=Window)

    def snapshot(self) -> dict[str, Any]:
        return {
            **{k: self.counts.get(k, 0) for k in COUNTERS},
            "ttft_ms": self.ttft_ms.percentiles(),
            "tpot_ms": self.tpot_ms.percentiles(),
            "tokens_per_s": self.tokens_per_s.percentiles(),
            "total_ms": self.total_ms.percentiles(),
        }


COUNTERS = (
    "requests",
    "errors",
    "timeouts",
    "cancels",
    "cache_hits",
    "prompt_tokens",
    "reused_tokens",
    "new_tokens",
    "drafted_tokens",
    "accepted_tokens",
)


class Metrics:
    """Thread-safe: generations run on worker threads while the server reads snapshots."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, ModelMetrics] = {}
        self.events: Counter = Counter()  # routing decisions, fallbacks, breaker trips, ...
        # (kind, model, key, value) sinks, e.g. a Prometheus exporter; called outside the lock.
        self._observers: list[Callable[[str, str, str, float], None]] = []

    def add_observer(self, observer: Callable[[str, str, str, float], None]) -> None:
        self._observers.append(observer)

    def _notify(self, kind: str, model: str, key: str, value: float) -> None:
        for observer in self._observers:
            observer(kind, model, key, value)

    def _model(self, model_id: str) -> ModelMetrics:
        return self._models.setdefault(model_id, ModelMetrics())

    def count(self, model_id: str, key: str, n: int = 1) -> None:
        with self._lock:
            self._model(model_id).counts[key] += n
        self._notify("count", model_id, key, n)

    def event(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.events[key] += n
        self._notify("event", "", key, n)

    def record_generation(
        self,
        model_id: str,
        *,
        prompt_tokens: int,
        reused_tokens: int,
        new_tokens: int,
        ttft_s: float | None,
        tpot_s: float | None,
        total_s: float,
        drafted: int = 0,
        accepted: int = 0,
    ) -> None:
        with self._lock:
            m = self._model(model_id)
            m.counts.update(
                prompt_tokens=prompt_tokens,
                reused_tokens=reused_tokens,
                new_tokens=new_tokens,
                drafted_tokens=drafted,
                accepted_tokens=accepted,
            )
            m.total_ms.add(total_s * 1000)
            if ttft_s is not None:
                m.ttft_ms.add(ttft_s * 1000)
            if tpot_s is not None:
                m.tpot_ms.add(tpot_s * 1000)
                m.tokens_per_s.add(1.0 / tpot_s if tpot_s > 0 else 0.0)
        if ttft_s is not None:
            self._notify("ttft", model_id, "", ttft_s)
        if tpot_s is not None:
            self._notify("tpot", model_id, "", tpot_s)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            models = {k: v.snapshot() for k, v in self._models.items()}
            for snap in models.values():
                prompt = snap["prompt_tokens"]
                snap["kv_reuse_share"] = snap["reused_tokens"] / prompt if prompt else None
            return {"models": models, "events": dict(self.events)}
