"""The decode step a CUDA graph captures (inference/runner.py, DecodeBinding) computes what the
plain step computes. CUDA graphs need a GPU; the fixed-shape binding they replay runs anywhere,
so it is checked here on the CPU provider, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference.model import Model, load_model_dir
from inference.paths import MODEL_FILE
from inference.runner import DecodeBinding
from inference.session import SessionConfig, create_session, cuda_graph_enabled


def greedy(model: Model, prompt: list[int], steps: int, fixed: bool) -> tuple[list[int], list]:
    model.runner.fixed_decode = fixed
    slot, _ = model.pool.lease(prompt)
    slot.truncate(0)
    try:
        logits = model.runner.forward(slot, prompt)[-1]
        tokens, rows = [], []
        for _ in range(steps):
            tokens.append(int(np.argmax(logits)))
            logits = model.runner.forward(slot, [tokens[-1]])[-1]
            rows.append(logits)
        assert isinstance(slot.decode_binding, DecodeBinding) == fixed
        # A shorter prefix reused by the next request: the mask follows the slot's length.
        slot.truncate(len(prompt) + 2)
        rows.append(model.runner.forward(slot, [tokens[2]])[-1])
    finally:
        model.pool.release(slot)
    return tokens, rows


@pytest.mark.parametrize("variant", ["fast"])
def test_fixed_binding_decodes_exactly_what_the_plain_step_does(tiny_model: Path, variant: str):
    model = load_model_dir(tiny_model / variant)
    prompt = [(i * 37) % 900 + 20 for i in range(40)]
    plain_tokens, plain = greedy(model, prompt, 8, fixed=False)
    fixed_tokens, fixed = greedy(model, prompt, 8, fixed=True)
    assert fixed_tokens == plain_tokens
    for a, b in zip(plain, fixed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_code_model_fixed_binding_agrees(code_model: Path):
    """The real Qwen graph (GroupQueryAttention reading the length from a padded mask)."""
    model = load_model_dir(code_model / "standard")
    prompt = [(i * 7919) % 40000 + 100 for i in range(64)]
    plain_tokens, plain = greedy(model, prompt, 6, fixed=False)
    fixed_tokens, fixed = greedy(model, prompt, 6, fixed=True)
    assert fixed_tokens == plain_tokens
    np.testing.assert_allclose(np.array(plain), np.array(fixed), atol=1e-4)


def test_no_cuda_graph_on_the_cpu_provider(tiny_model: Path):
    session = create_session(tiny_model / "fast" / MODEL_FILE, SessionConfig(prefer_gpu=False))
    assert not cuda_graph_enabled(session)
    assert load_model_dir(tiny_model / "fast").runner.fixed_decode is False
