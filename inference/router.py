"""Which model serves a request: fast or standard, with fallback and a circuit breaker per model.

Completions go to the fast model in fast mode, to the standard model otherwise; explain and
refactor always prefer the standard model. A model that fails to load or raises is skipped in
favour of the other; after `threshold` consecutive failures its breaker opens and keeps it out
for `cooldown_s`, then one trial request is let through (half-open).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from inference.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M")

FAST = "fast"
STANDARD = "standard"
REMOTE = "remote"


class Task(str, Enum):
    COMPLETION = "completion"
    EXPLAIN = "explain"
    REFACTOR = "refactor"


class RoutingError(Exception):
    """No model could serve the request; the message carries the last model's error."""


class NoModel(Exception):
    """Raised by a loader for a model that does not exist: skip it quietly, do not trip a breaker."""


def preference(task: Task, fast_mode: bool, remote_completions: bool = False) -> tuple[str, ...]:
    """Models to try, in order. A remote model (when configured) stands in front of the local
    standard model for chat tasks, and for completions when fast mode is off and the user asked."""
    if task is Task.COMPLETION and fast_mode:
        return (FAST, STANDARD)
    if task is Task.COMPLETION and not remote_completions:
        return (STANDARD, FAST)
    return (REMOTE, STANDARD, FAST)


@dataclass
class CircuitBreaker:
    threshold: int = 3
    cooldown_s: float = 30.0
    failures: int = 0
    opened_at: float | None = None
    clock: Callable[[], float] = time.monotonic

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.clock() - self.opened_at >= self.cooldown_s else "open"

    def allow(self) -> bool:
        return self.state != "open"

    def success(self) -> None:
        self.failures, self.opened_at = 0, None

    def failure(self) -> bool:
        """Count a failure; True when this one opened (or re-opened) the breaker."""
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            self.opened_at = self.clock()
            return True
        return False


class Router(Generic[M]):
    def __init__(
        self,
        loaders: dict[str, Callable[[], M]],
        metrics: Metrics,
        threshold: int = 3,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        remote_completions: bool = False,
    ) -> None:
        self._loaders = loaders
        self.remote_completions = remote_completions
        self._models: dict[str, M] = {}
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()
        self.metrics = metrics
        self.breakers = {v: CircuitBreaker(threshold, cooldown_s, clock=clock) for v in loaders}
        self.last_errors: dict[str, str] = {}

    def loaded(self, variant: str) -> M | None:
        return self._models.get(variant)

    def model(self, variant: str) -> M:
        """The variant's model, loading it on first use (one load at a time)."""
        with self._load_lock:
            if variant not in self._models:
                self._models[variant] = self._loaders[variant]()
            return self._models[variant]

    def run(self, task: Task, fast_mode: bool, work: Callable[[M, str], T]) -> tuple[T, str, bool]:
        """Run `work(model, variant)` on the first model that can serve; (result, variant, fallback)."""
        wanted = preference(task, fast_mode, self.remote_completions)
        order = [v for v in wanted if v in self._loaders]
        self.metrics.event(f"route.{task.value}.{order[0]}")
        errors: list[str] = []
        for position, variant in enumerate(order):
            breaker = self.breakers[variant]
            with self._lock:
                allowed = breaker.allow()
            if not allowed:
                self.metrics.event(f"breaker_open_skip.{variant}")
                errors.append(f"{variant}: circuit open after repeated failures")
                continue
            try:
                model = self.model(variant)
                result = work(model, variant)
            except NoModel as exc:
                errors.append(f"{variant}: {exc}")
                continue
            except Exception as exc:
                self._failed(variant, exc)
                errors.append(f"{variant}: {exc}")
                continue
            with self._lock:
                breaker.success()
            if position > 0:
                self.metrics.event(f"fallback.{order[0]}_to_{variant}")
            return result, variant, position > 0
        raise RoutingError("; ".join(errors) or "no model configured")

    def _failed(self, variant: str, exc: Exception) -> None:
        log.warning("%s model failed: %s", variant, exc)
        self.last_errors[variant] = str(exc)
        self.metrics.event(f"failure.{variant}")
        with self._lock:
            opened = self.breakers[variant].failure()
        if opened:
            self.metrics.event(f"breaker_opened.{variant}")

    def states(self) -> dict[str, str]:
        with self._lock:
            return {v: b.state for v, b in self.breakers.items()}
