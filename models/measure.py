"""`fastcomplete models measure`: a built model's first suggestion timed on this machine's GPU,
recorded for the GPU default (models/choice.py).

A first suggestion is what a person waits for when nothing of the prompt is cached: a cold
prefill of PROMPT_TOKENS, then NEW_TOKENS decoded, through the fast model as the server runs it
(shared KV buffers, CUDA graphs where the session can capture them).

`timed_run` is the one synthetic prefill-and-decode timing loop: this measurement and the GPU
benchmarks (bench/gpu_check.py, bench/fast_choice.py) all time with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference.kv_cache import KVSlot
    from inference.model import Model
    from inference.runner import Runner

PROMPT_TOKENS = 1024  # the eval's prompts on a GPU are 1-1.5k tokens
NEW_TOKENS = 24  # a line, with the stop after it
REPEATS = 8


@dataclass(frozen=True)
class FirstSuggestion:
    model: str
    device: str
    times_ms: tuple[float, ...]

    @property
    def p95_ms(self) -> float:
        from inference.metrics import percentile

        return percentile(self.times_ms, 0.95)

    @property
    def p50_ms(self) -> float:
        from inference.metrics import percentile

        return percentile(self.times_ms, 0.50)


@dataclass(frozen=True)
class TimedRun:
    prefill_s: float
    decode_s: tuple[float, ...]  # each decode step's forward pass
    tokens: tuple[int, ...]  # the greedy token each decode step fed
    total_s: float  # the prefill and every step, choosing each token included


def synthetic_ids(count: int, span: int = 40000) -> list[int]:
    """Token ids for timing only, spread over `span` ids from 100 up (past the special tokens)."""
    return [(i * 7919) % span + 100 for i in range(count)]


def timed_run(runner: Runner, slot: KVSlot, ids: list[int], steps: int) -> TimedRun:
    """Prefill `ids` into `slot`, then decode `steps` greedy tokens, each forward pass timed."""
    started = time.perf_counter()
    logits = runner.forward(slot, ids)
    prefill_s = time.perf_counter() - started
    tokens, decode_s = [], []
    for _ in range(steps):
        tokens.append(int(logits[-1].argmax()))
        step = time.perf_counter()
        logits = runner.forward(slot, [tokens[-1]])
        decode_s.append(time.perf_counter() - step)
    total_s = time.perf_counter() - started
    return TimedRun(prefill_s, tuple(decode_s), tuple(tokens), total_s)


def cold_runs(model: Model, ids: list[int], steps: int, repeats: int) -> list[TimedRun]:
    """`repeats` timed runs of `model`, each with nothing of `ids` cached."""
    runs = []
    for _ in range(repeats):
        model.pool.clear()
        slot, _ = model.pool.lease(ids)
        runs.append(timed_run(model.runner, slot, ids, steps))
        model.pool.release(slot)
    return runs


def first_suggestion(
    fast_dir: Path, prefer_gpu: bool = True, repeats: int = REPEATS
) -> FirstSuggestion:
    from inference.kv_cache import PoolConfig
    from inference.model import load_model_dir
    from inference.session import SessionConfig

    pool = PoolConfig(capacity_tokens=PROMPT_TOKENS + NEW_TOKENS + 8)
    model = load_model_dir(fast_dir, SessionConfig(prefer_gpu=prefer_gpu), pool)
    ids = synthetic_ids(PROMPT_TOKENS, model.spec.vocab_size - 200)
    # The first run also loads kernels and captures graphs: not kept.
    runs = cold_runs(model, ids, NEW_TOKENS, repeats + 1)[1:]
    device = "cuda" if model.on_gpu else "cpu"
    return FirstSuggestion(model.name, device, tuple(round(r.total_s * 1000, 1) for r in runs))
