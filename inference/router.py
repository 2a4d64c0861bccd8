"""Which model serves a request: fast or standard, with fallback and a circuit breaker per model.

Completions go to the fast model in fast mode, to the standard model otherwise; explain and
refactor always prefer the standard model. A model that fails (ModelFailure: ORT raised, a file is
corrupt, a remote broke) is skipped in favour of the next; after `threshold` consecutive failures
its breaker opens and keeps it out for `cooldown_s`, then one trial request is let through
(half-open). Any other exception is a bug in our code: it propagates, with its traceback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from inference.errors import ModelFailure, NoModel
from inference.metrics import Metrics
from inference.tuning import BREAKER_COOLDOWN_S, BREAKER_FAILURES

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M")

FAST = "fast"
STANDARD = "standard"
REMOTE = "remote"
CIRCUIT_OPEN = "circuit open after repeated failures"


class Task(str, Enum):
    COMPLETION = "completion"
    EXPLAIN = "explain"
    REFACTOR = "refactor"


class RoutingError(Exception):
    """No model could serve the request; the message carries each model's reason."""


def preference(task: Task, fast_mode: bool, remote_completions: bool = False) -> tuple[str, ...]:
    """Models to try, in order. A remote model (when configured) stands in front of the local
    standard model for chat tasks, and for completions when fast mode is off and the user asked."""
    if task is Task.COMPLETION and fast_mode:
        return (FAST, STANDARD)
    if task is Task.COMPLETION and not remote_completions:
        return (STANDARD, FAST)
    return (REMOTE, STANDARD, FAST)


@dataclass(frozen=True)
class Route:
    """The one decision of which models serve a request, in order; made once, carried along."""

    task: Task
    order: tuple[str, ...]

    @property
    def preferred(self) -> str:
        return self.order[0]

    def quality_retry(self, served: str) -> Route | None:
        """Where to ask again when `served` gave an answer the caller cannot use (a completion
        that breaks the syntax): the standard model after the fast one, else nowhere."""
        if self.task is Task.COMPLETION and served == FAST and STANDARD in self.order:
            return Route(self.task, (STANDARD,))
        return None


@dataclass
class CircuitBreaker:
    threshold: int = BREAKER_FAILURES
    cooldown_s: float = BREAKER_COOLDOWN_S
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
        threshold: int = BREAKER_FAILURES,
        cooldown_s: float = BREAKER_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
        remote_completions: bool = False,
        completions_load: bool = True,
    ) -> None:
        self._loaders = loaders
        self.remote_completions = remote_completions
        self.completions_load = completions_load
        self._models: dict[str, M] = {}
        self._load_locks = {v: threading.Lock() for v in loaders}
        self._lock = threading.Lock()
        self.metrics = metrics
        self.breakers = {v: CircuitBreaker(threshold, cooldown_s, clock=clock) for v in loaders}

    def route(self, task: Task, fast_mode: bool) -> Route:
        wanted = preference(task, fast_mode, self.remote_completions)
        return Route(task, tuple(v for v in wanted if v in self._loaders))

    def loaded(self, variant: str) -> M | None:
        return self._models.get(variant)

    def why_not(self, variant: str, task: Task) -> str | None:
        """Why `variant` cannot serve `task` now, or None when it can: the one rule that
        planning (which model's tokenizer shapes the prompt) and `run` (which model serves)
        share. Its breaker must let requests through; a local model must be loaded already for
        a completion when completions may not load models."""
        with self._lock:
            if not self.breakers[variant].allow():
                return CIRCUIT_OPEN
        local = variant != REMOTE  # a remote "loads" in no time: nothing to wait for
        loads = task is not Task.COMPLETION or self.completions_load
        if local and not loads and variant not in self._models:
            return "not loaded (it loads on first use)"
        return None

    def model(self, variant: str, wait: bool = True) -> M:
        """The variant's model, loading it on first use. A loaded model is returned without a
        lock; with `wait=False` a model another thread is loading raises NoModel at once, so a
        completion never waits on the standard model's load."""
        model = self._models.get(variant)
        if model is not None:
            return model
        lock = self._load_locks[variant]
        if not lock.acquire(blocking=wait):
            raise NoModel("still loading")
        try:
            if variant not in self._models:
                self._models[variant] = self._loaders[variant]()
            return self._models[variant]
        finally:
            lock.release()

    def run(self, route: Route, work: Callable[[M, str], T]) -> tuple[T, str, str | None]:
        """Run `work(model, variant)` on the first model of the route that can serve:
        (result, variant, why the models before it could not, or None when the first served)."""
        if not route.order:
            raise RoutingError("no model configured")
        self.metrics.event(f"route.{route.task.value}.{route.preferred}")
        errors: list[str] = []
        for variant in route.order:
            why = self.why_not(variant, route.task)
            if why is not None:
                if why == CIRCUIT_OPEN:
                    self.metrics.event(f"breaker_open_skip.{variant}")
                errors.append(f"{variant}: {why}")
                continue
            try:
                model = self.model(variant, wait=route.task is not Task.COMPLETION)
                result = work(model, variant)
            except NoModel as exc:
                errors.append(f"{variant}: {exc}")
                continue
            except ModelFailure as exc:
                self._failed(variant, exc)
                errors.append(f"{variant}: {exc}")
                continue
            with self._lock:
                self.breakers[variant].success()
            if errors:
                self.metrics.event(f"fallback.{route.preferred}_to_{variant}")
            return result, variant, "; ".join(errors) or None
        raise RoutingError("; ".join(errors))

    def _failed(self, variant: str, exc: Exception) -> None:
        log.warning("%s model failed: %s", variant, exc)
        self.metrics.event(f"failure.{variant}")
        with self._lock:
            opened = self.breakers[variant].failure()
        if opened:
            self.metrics.event(f"breaker_opened.{variant}")

    def states(self) -> dict[str, str]:
        with self._lock:
            return {v: b.state for v, b in self.breakers.items()}
