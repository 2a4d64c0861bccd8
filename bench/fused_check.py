"""One-off check of models/fused_graph.py on a real checkpoint: accuracy vs transformers, CPU speed.

    python bench/fused_check.py --hf /tmp/hf --out /tmp/fused

Builds <out>/model.onnx (FP32 fused) and <out>/int8/model.onnx (MatMulNBits, 8-bit, block 32,
symmetric, accuracy_level 4), compares teacher-forced logits on Python source against transformers,
then times decode (shared KV buffer bound through IOBinding, as the engine runs it) and prefill.
Needs the `build` extra (torch, transformers) for the reference logits.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from models.fused_graph import build_fused_graph

DECODE_STEPS = 64
CONTEXTS = (256, 512)
PREFILL_LEN = 1024
KV_BUFFER_LEN = 2048
# Host noise on a shared 2-core VM is large; each figure is the best of this many rounds.
ROUNDS = 3


def quantize_int8(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    cfg = DefaultWeightOnlyQuantConfig(
        block_size=32,
        is_symmetric=True,
        accuracy_level=4,
        quant_format=QuantFormat.QOperator,
        bits=8,
    )
    # A path (not a ModelProto) so the quantizer resolves the external data next to it.
    quantizer = MatMulNBitsQuantizer(str(src), algo_config=cfg)
    quantizer.process()
    dst.parent.mkdir(parents=True, exist_ok=True)
    quantizer.model.save_model_to_file(str(dst), use_external_data_format=True)
    left = [
        n.name
        for n in onnx.load(str(dst), load_external_data=False).graph.node
        if n.op_type == "MatMul"
    ]
    if left:
        raise RuntimeError(f"MatMuls left unquantized: {left}")


def code_tokens(hf_dir: Path, count: int) -> np.ndarray:
    """Python source (stdlib textwrap, repeated as needed) tokenized to exactly `count` ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    ids: list[int] = []
    source = inspect.getsource(textwrap)
    while len(ids) < count:
        ids += tokenizer.encode(source).ids
    return np.array([ids[:count]], dtype=np.int64)


def session(path: Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class KvShape:
    def __init__(self, hf_dir: Path) -> None:
        config = json.loads((hf_dir / "config.json").read_text())
        self.layers = int(config["num_hidden_layers"])
        self.kv_heads = int(config["num_key_value_heads"])
        self.head_dim = int(
            config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        )
        self.vocab = int(config["vocab_size"])


def prompt_logits(sess: ort.InferenceSession, kv: KvShape, ids: np.ndarray) -> np.ndarray:
    past = np.zeros((1, kv.kv_heads, 0, kv.head_dim), np.float32)
    feeds: dict[str, np.ndarray] = {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "num_logits_to_keep": np.array(ids.shape[1], np.int64),
    }
    for i in range(kv.layers):
        feeds[f"past_key_values.{i}.key"] = past
        feeds[f"past_key_values.{i}.value"] = past
    return sess.run(["logits"], feeds)[0][0]


def reference_logits(hf_dir: Path, ids: np.ndarray) -> np.ndarray:
    """transformers' logits, computed in a spawned process.

    Once torch has run in a process its OpenMP threads keep competing for the two cores, which
    measurably slowed ORT decode (about 9 -> 15 ms/token) in the same process.
    """
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_reference_logits, (hf_dir, ids))


def _reference_logits(hf_dir: Path, ids: np.ndarray) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        hf_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        return model(torch.from_numpy(ids)).logits[0].numpy()


def compare(name: str, logits: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    agree = float((logits.argmax(-1) == reference.argmax(-1)).mean())
    diff = float(np.abs(logits - reference).max())
    print(f"{name}: top-1 agreement {agree:.4f}, max |logit diff| {diff:.4g}", flush=True)
    return {"top1_agreement": agree, "max_abs_diff": diff}


class SharedKvRunner:
    """Shared-buffer IOBinding decode, the way the engine drives the graph."""

    def __init__(self, sess: ort.InferenceSession, kv: KvShape) -> None:
        self.sess = sess
        self.binding = sess.io_binding()
        shape = (1, kv.kv_heads, KV_BUFFER_LEN, kv.head_dim)
        self.buffers = [np.zeros(shape, np.float32) for _ in range(2 * kv.layers)]
        self.logits = np.zeros((1, 1, kv.vocab), np.float32)
        self.binding.bind_ortvalue_output("logits", ort.OrtValue.ortvalue_from_numpy(self.logits))
        self.keep = np.array(1, np.int64)
        for i in range(kv.layers):
            for j, kind in enumerate(("key", "value")):
                value = ort.OrtValue.ortvalue_from_numpy(self.buffers[2 * i + j])
                self.binding.bind_ortvalue_input(f"past_key_values.{i}.{kind}", value)
                self.binding.bind_ortvalue_output(f"present.{i}.{kind}", value)

    def step(self, ids: np.ndarray, past_len: int) -> int:
        """Run one chunk after past_len cached tokens; returns the argmax of the last position."""
        self.binding.bind_cpu_input("input_ids", ids)
        self.binding.bind_cpu_input(
            "attention_mask", np.ones((1, past_len + ids.shape[1]), np.int64)
        )
        self.binding.bind_cpu_input("num_logits_to_keep", self.keep)
        self.sess.run_with_iobinding(self.binding)
        return int(self.logits[0, -1].argmax())


def decode_ms(runner: SharedKvRunner, stream: np.ndarray, context: int) -> float:
    """Median ms per token over DECODE_STEPS single-token steps after a `context`-token prefill."""
    runner.step(stream[:, :context], 0)
    times = []
    for t in range(context, context + DECODE_STEPS):
        start = time.perf_counter()
        runner.step(stream[:, t : t + 1], t)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def prefill_ms(runner: SharedKvRunner, stream: np.ndarray, repeats: int = 3) -> float:
    """Median ms for a PREFILL_LEN-token prompt from an empty cache, keeping one position's logits."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        runner.step(stream[:, :PREFILL_LEN], 0)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def bench(path: Path, kv: KvShape, stream: np.ndarray) -> dict[str, float]:
    sess = session(path)
    runner = SharedKvRunner(sess, kv)
    for t in range(8):  # warm-up: first runs pay for allocations and packing
        runner.step(stream[:, : 16 + t], 0)
    result = {
        f"decode_ms_ctx{c}": min(decode_ms(runner, stream, c) for _ in range(ROUNDS))
        for c in CONTEXTS
    }
    result[f"prefill_ms_{PREFILL_LEN}"] = prefill_ms(runner, stream)
    print(f"{path}: {json.dumps({k: round(v, 2) for k, v in result.items()})}", flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf", type=Path, default=Path("/tmp/hf"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/fused"))
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--skip-build", action="store_true", help="reuse graphs already in --out")
    args = parser.parse_args(argv)
    fp32, int8 = args.out / "model.onnx", args.out / "int8" / "model.onnx"
    if not args.skip_build:
        start = time.perf_counter()
        build_fused_graph(args.hf, fp32)
        print(f"built {fp32} in {time.perf_counter() - start:.1f}s", flush=True)
        start = time.perf_counter()
        quantize_int8(fp32, int8)
        print(f"quantized {int8} in {time.perf_counter() - start:.1f}s", flush=True)
    kv = KvShape(args.hf)
    ids = code_tokens(args.hf, args.tokens)
    reference = reference_logits(args.hf, ids)
    report: dict[str, Any] = {}
    for name, path in (("fp32_fused", fp32), ("int8_fused", int8)):
        report[name] = compare(name, prompt_logits(session(path), kv, ids), reference)
    stream = code_tokens(args.hf, PREFILL_LEN + DECODE_STEPS)
    for name, path in (("fp32_fused", fp32), ("int8_fused", int8)):
        report[name].update(bench(path, kv, stream))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
