"""How likely the model finds a continuation of a prompt: the sum of its tokens' log-probabilities.

Used to rank completion candidates by the code that follows the cursor (a model without
fill-in-the-middle training never sees that code otherwise). Runs on the prompt's KV slot, so
only the candidate and the scored text are computed.
"""

from __future__ import annotations

import threading

import numpy as np

from inference.kv_cache import common_prefix
from inference.model import Model
from inference.tuning import PREFILL_CHUNK_TOKENS


class ScoringCancelled(Exception):
    pass


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def continuation_logprob(
    model: Model, context: list[int], continuation: list[int], cancel: threading.Event
) -> float | None:
    """log P(continuation | context); None when the two do not fit one KV slot.
    Raises ScoringCancelled when `cancel` is set between forward passes."""
    if not context or not continuation:
        return 0.0 if context else None
    full = [*context, *continuation]
    if len(full) + 1 > model.pool.capacity_tokens:
        return None
    slot, _ = model.pool.lease(full)
    try:
        # The logits that predict the continuation start at the context's last position.
        slot.truncate(min(len(slot), len(context) - 1))
        while len(slot) < len(context) - 1:
            if cancel.is_set():
                raise ScoringCancelled
            end = min(len(context) - 1, len(slot) + PREFILL_CHUNK_TOKENS)
            model.runner.forward(slot, full[len(slot) : end])
        if cancel.is_set():
            raise ScoringCancelled
        rows = len(continuation) + 1
        logits = model.runner.forward(slot, full[len(context) - 1 :], rows)
        logp = _log_softmax(logits[:-1])
        return float(logp[np.arange(len(continuation)), continuation].sum())
    finally:
        model.pool.release(slot)


def split_shared(
    prompt_ids: list[int], encoded: list[list[int]]
) -> tuple[list[int], list[list[int]]]:
    """One context shared by every encoding, and what follows it in each: encodings of
    prompt + candidate re-tokenize the prompt's end differently, and log-probabilities are only
    comparable given the same context."""
    shared = min((common_prefix(prompt_ids, ids) for ids in encoded), default=0)
    return prompt_ids[:shared], [ids[shared:] for ids in encoded]
