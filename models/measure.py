"""`fastcomplete models measure`: a built model's first suggestion timed on this machine's GPU,
recorded for the GPU default (inference/model_choice.py).

A first suggestion is what a person waits for when nothing of the prompt is cached: a cold
prefill of PROMPT_TOKENS, then NEW_TOKENS decoded, through the fast model as the server runs it
(shared KV buffers, CUDA graphs where the session can capture them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

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
        ordered = sorted(self.times_ms)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    @property
    def p50_ms(self) -> float:
        ordered = sorted(self.times_ms)
        return ordered[len(ordered) // 2]


def first_suggestion(
    fast_dir: Path, prefer_gpu: bool = True, repeats: int = REPEATS
) -> FirstSuggestion:
    from inference.kv_cache import PoolConfig
    from inference.model import load_model_dir
    from inference.session import SessionConfig

    pool = PoolConfig(capacity_tokens=PROMPT_TOKENS + NEW_TOKENS + 8)
    model = load_model_dir(fast_dir, SessionConfig(prefer_gpu=prefer_gpu), pool)
    ids = [(i * 7919) % (model.spec.vocab_size - 200) + 100 for i in range(PROMPT_TOKENS)]
    times = []
    for _ in range(repeats + 1):  # the first also loads kernels and captures graphs: not kept
        model.pool.clear()
        slot, _ = model.pool.lease(ids)
        started = time.perf_counter()
        logits = model.runner.forward(slot, ids)
        for _ in range(NEW_TOKENS):
            logits = model.runner.forward(slot, [int(logits[-1].argmax())])
        times.append((time.perf_counter() - started) * 1000)
        model.pool.release(slot)
    device = "cuda" if model.on_gpu else "cpu"
    return FirstSuggestion(model.name, device, tuple(round(t, 1) for t in times[1:]))
