"""Checks run inside every build: the ONNX graphs must match the weights they came from."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from inference.graph import GraphSpec, forward, inspect_graph
from inference.session import SessionConfig, create_session

MIN_AGREEMENT = 0.95
# 4-bit weights lose more by design (SmolLM2 ~0.75, Qwen2.5-Coder-0.5B 0.933): their gate only
# catches a broken quantization; the eval and benchmarks say whether the model is worth it.
MIN_AGREEMENT_4BIT = 0.90
# The FP32 graph's NLL on the sample may differ from transformers' by float rounding only.
MAX_NLL_GAP_FP32 = 0.005
MAX_NLL_GAP_FP16 = 0.02  # a CUDA build's FP16 graph rounds more
SAMPLE_FILE = "validation_sample.py.txt"
MAX_SAMPLE_TOKENS = 512
GREEDY_PROMPTS = (
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main(argv):\n    ",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
)
GREEDY_TOKENS = 12


class ValidationError(Exception):
    """A built graph disagrees with its reference beyond what the build accepts."""


@dataclass
class Agreement:
    tokens: int
    top1_agreement: float
    nll_standard: float
    nll_fast: float
    nll_torch: float | None = None


def sample_text() -> str:
    return resources.files("models").joinpath("data", SAMPLE_FILE).read_text()


def _session(path: Path, gpu: bool) -> tuple[Any, GraphSpec]:
    session = create_session(path, SessionConfig(prefer_gpu=gpu))
    return session, inspect_graph(session)


def sample_ids(tokenizer_file: Path, bos_token_id: int | None) -> np.ndarray:
    """The sample text as a build encodes it (models/build.py: a BOS first where the model
    always has one), cut to MAX_SAMPLE_TOKENS."""
    from tokenizers import Tokenizer

    ids = (
        Tokenizer.from_file(str(tokenizer_file)).encode(sample_text(), add_special_tokens=False).ids
    )
    if bos_token_id is not None:
        ids = [bos_token_id, *ids]
    return np.array(ids[:MAX_SAMPLE_TOKENS], dtype=np.int64)


def teacher_forced_logits(path: Path, ids: np.ndarray, gpu: bool = False) -> np.ndarray:
    session, spec = _session(path, gpu)
    logits, _ = forward(session, spec, ids, 0, spec.empty_past(), num_logits=len(ids))
    return logits


def nll(logits: np.ndarray, targets: np.ndarray) -> float:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logprobs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-logprobs[np.arange(len(targets)), targets].mean())


def agreement(standard: Path, fast: Path, ids: np.ndarray, gpu: bool = False) -> Agreement:
    """Teacher-forced top-1 agreement of fast vs standard, and each one's NLL on the sample."""
    ref = teacher_forced_logits(standard, ids, gpu)[:-1]
    got = teacher_forced_logits(fast, ids, gpu)[:-1]
    targets = ids[1:]
    return Agreement(
        tokens=len(targets),
        top1_agreement=float((ref.argmax(-1) == got.argmax(-1)).mean()),
        nll_standard=round(nll(ref, targets), 4),
        nll_fast=round(nll(got, targets), 4),
    )


def onnx_greedy(path: Path, ids: list[int], steps: int, gpu: bool = False) -> list[int]:
    session, spec = _session(path, gpu)
    past, past_len, chunk, out = spec.empty_past(), 0, np.array(ids), []
    for _ in range(steps):
        logits, past = forward(session, spec, chunk, past_len, past)
        past_len += len(chunk)
        out.append(int(logits[-1].argmax()))
        chunk = np.array(out[-1:])
    return out


def torch_reference(
    hf_dir: Path, prompts: list[list[int]], steps: int, sample: np.ndarray
) -> tuple[list[list[int]], float]:
    """transformers' greedy tokens for each prompt, and its NLL on the sample."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    results = []
    with torch.no_grad():
        logits = model(torch.tensor([sample.tolist()])).logits[0, :-1].numpy()
        sample_nll = nll(logits, sample[1:])
        for ids in prompts:
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=steps,
                min_new_tokens=steps,  # compare a fixed length: do not stop at EOS
                do_sample=False,
                pad_token_id=0,
            )
            results.append(out[0, len(ids) :].tolist())
    return results, sample_nll


def agreement_gate(bits: int) -> float:
    """The top-1 agreement with the standard model a fast model with `bits` weights must keep."""
    return MIN_AGREEMENT if bits >= 8 else MIN_AGREEMENT_4BIT


def validate(
    hf_dir: Path, standard: Path, fast: Path, encode: Any, bits: int = 8, cuda: bool = False
) -> dict[str, Any]:
    """Run both checks; raise ValidationError when either fails. Returns the figures.
    `bits`: the fast model's weight bits (the agreement gate depends on them). `cuda`: the graphs
    are a CUDA build (FP16 standard model), run on the GPU where there is one."""
    gate = agreement_gate(bits)
    max_gap = MAX_NLL_GAP_FP16 if cuda else MAX_NLL_GAP_FP32
    prompts = [encode(p) for p in GREEDY_PROMPTS]
    ids = np.array(encode(sample_text())[:MAX_SAMPLE_TOKENS], dtype=np.int64)
    expected, nll_torch = torch_reference(hf_dir, prompts, GREEDY_TOKENS, ids)
    got = [onnx_greedy(standard, p, GREEDY_TOKENS, cuda) for p in prompts]
    same = sum(a == b for a, b in zip(expected, got, strict=True))
    if same != len(prompts):
        raise ValidationError(
            f"ONNX greedy tokens differ from transformers on {len(prompts) - same} of "
            f"{len(prompts)} prompts: the export is wrong"
        )
    figures = agreement(standard, fast, ids, cuda)
    figures.nll_torch = round(nll_torch, 4)
    if abs(figures.nll_standard - nll_torch) > max_gap:
        raise ValidationError(
            f"standard ONNX NLL {figures.nll_standard:.4f} vs transformers {nll_torch:.4f} on "
            f"{SAMPLE_FILE}: the graph is wrong"
        )
    if figures.top1_agreement < gate:
        raise ValidationError(
            f"fast model top-1 agreement {figures.top1_agreement:.3f} < {gate} on "
            f"{SAMPLE_FILE}: quantization lost too much quality"
        )
    return {
        "sample": SAMPLE_FILE,
        **asdict(figures),
        "top1_agreement": round(figures.top1_agreement, 4),
        "min_agreement": gate,
        "onnx_vs_torch_greedy": {
            "prompts": len(prompts),
            "identical": same,
            "tokens": GREEDY_TOKENS,
        },
    }
