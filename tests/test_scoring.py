"""Ranking candidates by the code after the cursor: log-probabilities on the prompt's KV slot,
and alternatives branching at the first token."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from inference.generate import Generation, GenerationConfig
from inference.model import Model, load_model_dir
from inference.scoring import ScoringCancelled, continuation_logprob, split_shared
from models.validate import sample_text


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> Model:
    return load_model_dir(tiny_model / "fast")


def _ids(model: Model, n: int) -> list[int]:
    return model.tokenizer.encode(sample_text())[:n]


def _reference(model: Model, context: list[int], continuation: list[int]) -> float:
    """The same sum from one pass over the whole text on a fresh slot."""
    model.pool.clear()
    slot, _ = model.pool.lease([])
    try:
        full = context + continuation
        logits = model.runner.forward(slot, full, len(full)).astype(np.float64)
    finally:
        model.pool.release(slot)
    rows = logits[len(context) - 1 : -1]
    logp = rows - rows.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    return float(logp[np.arange(len(continuation)), continuation].sum())


def test_scores_on_a_cached_prompt_equal_a_pass_from_scratch(tiny: Model) -> None:
    ids = _ids(tiny, 120)
    context, continuation = ids[:100], ids[100:]
    expected = _reference(tiny, context, continuation)
    # The prompt cached first, as a completion leaves it; then scored twice (second: all cached).
    Generation(tiny, context, GenerationConfig(max_new_tokens=3)).run()
    first = continuation_logprob(tiny, context, continuation, threading.Event())
    again = continuation_logprob(tiny, context, continuation, threading.Event())
    assert first == pytest.approx(expected, abs=1e-3)
    assert again == pytest.approx(expected, abs=1e-3)
    assert first < 0


def test_a_likelier_continuation_scores_higher(tiny: Model) -> None:
    ids = _ids(tiny, 80)
    context = ids[:60]
    # What the model itself would write next is likelier than other tokens.
    greedy = Generation(tiny, context, GenerationConfig(max_new_tokens=8)).run().token_ids
    shifted = [(t + 7) % tiny.spec.vocab_size for t in greedy]
    own = continuation_logprob(tiny, context, greedy, threading.Event())
    other = continuation_logprob(tiny, context, shifted, threading.Event())
    assert own is not None and other is not None and own > other


def test_scoring_stops_when_cancelled(tiny: Model) -> None:
    cancel = threading.Event()
    cancel.set()
    tiny.pool.clear()
    ids = _ids(tiny, 90)
    with pytest.raises(ScoringCancelled):
        continuation_logprob(tiny, ids[:80], ids[80:], cancel)


def test_too_long_to_fit_is_not_scored(tiny: Model) -> None:
    n = tiny.pool.capacity_tokens
    assert continuation_logprob(tiny, [1] * n, [1, 2], threading.Event()) is None


def test_split_shared_uses_one_context_for_all() -> None:
    prompt = [1, 2, 3, 4]
    context, rests = split_shared(prompt, [[1, 2, 3, 9, 9], [1, 2, 5, 6]])
    assert context == [1, 2]
    assert rests == [[3, 9, 9], [5, 6]]


def test_first_choice_branches_at_the_first_token(tiny: Model) -> None:
    context = _ids(tiny, 50)
    greedy = Generation(tiny, context, GenerationConfig(max_new_tokens=4)).run()
    second = Generation(tiny, context, GenerationConfig(max_new_tokens=4, first_choice=1)).run()
    tiny.pool.clear()
    slot, _ = tiny.pool.lease([])
    try:
        logits = tiny.runner.forward(slot, context)[-1]
    finally:
        tiny.pool.release(slot)
    ranked = np.argsort(-logits)
    assert greedy.token_ids[0] == ranked[0]
    assert second.token_ids[0] == ranked[1]
    assert GenerationConfig(first_choice=1).cache_key != GenerationConfig().cache_key
