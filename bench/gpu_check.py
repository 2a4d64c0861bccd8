"""The CUDA path, checked and measured: where each model's nodes run, where the KV cache lives,
and how fast prefill and decode are.

    python -m bench.gpu_check [--model NAME] [--contexts 256,1024,4096] [--allow-cpu]

For each built variant (fast, standard) it prints the providers the session got, how many graph
nodes ran on each provider in a profiled forward pass (a compute node on the CPU is a silent
fallback, and fails the check), the device the KV buffers bound through IOBinding live on, and
prefill ms / decode ms per token at each context, decoding twice: plainly and with the decode
step captured in a CUDA graph (inference/runner.py; on the CPU provider the same fixed-shape
binding without the capture), and whether both decode the same tokens. Without a GPU it says so and exits 2, unless
`--allow-cpu` (the same measurements on the CPU provider; the tests use it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

NO_GPU = 2
# Ops that carry the model's arithmetic: on a GPU run none of them may be left on the CPU. Shape
# arithmetic (Shape, Gather of dims, Concat of sizes) may run on the CPU: ORT places it there.
COMPUTE_OPS = frozenset(
    {
        "MatMul",
        "MatMulNBits",
        "GroupQueryAttention",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "Mul",
        "Sigmoid",
        "Add",
    }
)
DECODE_STEPS = 16
CONTEXT_SLACK = 64  # room after the longest prefill for the decode steps


@dataclass
class VariantReport:
    variant: str
    providers: list[str]
    nodes_by_provider: dict[str, int]
    compute_ops_on_cpu: list[str]
    kv_device: str
    prefill_ms: dict[int, float] = field(default_factory=dict)
    decode_ms: dict[int, float] = field(default_factory=dict)
    cuda_graph: bool = False  # the session could capture graphs
    graph_decode_ms: dict[int, float] = field(default_factory=dict)
    graph_same_tokens: bool = True  # graph decode chose the tokens plain decode chose

    @property
    def on_gpu(self) -> bool:
        return "CUDAExecutionProvider" in self.providers and not self.compute_ops_on_cpu


def gpu_available() -> tuple[bool, str]:
    """Whether the CUDA provider can be had here, and why not."""
    import onnxruntime as ort

    from inference.session import CUDA, gpu_present

    if not gpu_present():
        return False, "no NVIDIA device (/dev/nvidiactl, /dev/nvidia0) on this machine"
    if CUDA not in ort.get_available_providers():
        return False, f"this onnxruntime ({ort.__version__}) has no CUDA provider"
    return True, ""


def gpu_bench_parser(description: str | None) -> argparse.ArgumentParser:
    """The arguments every GPU benchmark takes: the model, --allow-cpu, --json."""
    from models.choice import selected_model

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default=selected_model())
    parser.add_argument("--allow-cpu", action="store_true", help="measure on the CPU without a GPU")
    parser.add_argument("--json", type=Path, default=None)
    return parser


def require_gpu(name: str, allow_cpu: bool, task: str = "measure") -> bool | None:
    """Whether a GPU is there to measure; None (say why, exit NO_GPU) when there is none and the
    CPU was not allowed."""
    ok, why = gpu_available()
    if not ok and not allow_cpu:
        print(f"{name}: no GPU to {task}: {why}", file=sys.stderr)
        return None
    if not ok:
        print(f"{name}: {why}; measuring the CPU provider instead (--allow-cpu)")
    return ok


def node_placement(model_file: Path, prefer_gpu: bool) -> tuple[Counter, list[str]]:
    """Nodes per provider in one profiled 16-token forward pass, and the compute ops on the CPU."""
    import numpy as np
    import onnxruntime as ort

    from inference.graph import inspect_graph
    from inference.session import CPU, CUDA, SessionConfig, session_options

    opts = session_options(SessionConfig())
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "profile")
        providers = [CUDA, CPU] if prefer_gpu else [CPU]
        session = ort.InferenceSession(str(model_file), sess_options=opts, providers=providers)
        spec = inspect_graph(session)
        ids = np.arange(100, 116, dtype=np.int64)
        session.run(spec.output_names, spec.feeds(ids, 0, spec.empty_past(), 1))
        events = json.loads(Path(session.end_profiling()).read_text())
    by_provider: Counter = Counter()
    on_cpu: set[str] = set()
    for event in events:
        args = event.get("args", {})
        if event.get("cat") != "Node" or "provider" not in args:
            continue
        if not event.get("name", "").endswith("_kernel_time"):
            continue
        by_provider[args["provider"]] += 1
        if prefer_gpu and args["provider"] == CPU and args.get("op_name") in COMPUTE_OPS:
            on_cpu.add(args["op_name"])
    return by_provider, sorted(on_cpu)


def timed_decode(model, contexts: list[int], reps: int) -> tuple[dict, dict, list[list[int]]]:
    """Median prefill and decode ms per context, and the greedy tokens decoded at each."""
    from models.measure import cold_runs, synthetic_ids

    ids = synthetic_ids(max(contexts))
    prefill_ms, decode_ms, chosen = {}, {}, []
    for ctx in contexts:
        runs = cold_runs(model, ids[:ctx], DECODE_STEPS, reps)
        chosen.append(list(runs[-1].tokens))
        prefill = [r.prefill_s for r in runs]
        decode = [step for r in runs for step in r.decode_s]
        prefill_ms[ctx] = round(statistics.median(prefill) * 1000, 2)
        decode_ms[ctx] = round(statistics.median(decode) * 1000, 2)
    return prefill_ms, decode_ms, chosen


def measure(directory: Path, contexts: list[int], prefer_gpu: bool, reps: int) -> VariantReport:
    from inference.kv_cache import PoolConfig
    from inference.model import MODEL_FILE, load_model_dir
    from inference.session import SessionConfig

    capacity = max(contexts) + CONTEXT_SLACK
    pool = PoolConfig(capacity_tokens=capacity)
    model = load_model_dir(directory, SessionConfig(prefer_gpu=prefer_gpu, cuda_graph=False), pool)
    by_provider, on_cpu = node_placement(directory / MODEL_FILE, prefer_gpu)
    slot, _ = model.pool.lease([0])
    kv_device = slot.buffers[0].device_name() if slot.buffers else "host arrays (no IOBinding)"
    model.pool.release(slot)
    report = VariantReport(
        model.variant, model.runner.session.get_providers(), dict(by_provider), on_cpu, kv_device
    )
    report.prefill_ms, report.decode_ms, plain = timed_decode(model, contexts, reps)
    del model
    graphed = load_model_dir(directory, SessionConfig(prefer_gpu=prefer_gpu), pool)
    report.cuda_graph = graphed.runner.cuda_graph
    graphed.runner.fixed_decode = True  # on the CPU provider: the binding, without a capture
    _, report.graph_decode_ms, tokens = timed_decode(graphed, contexts, reps)
    report.graph_same_tokens = tokens == plain
    return report


def print_report(reports: list[VariantReport], contexts: list[int]) -> None:
    for r in reports:
        nodes = ", ".join(
            f"{p.removesuffix('ExecutionProvider')} {n}" for p, n in r.nodes_by_provider.items()
        )
        print(f"{r.variant}: providers {r.providers}")
        print(f"  nodes run: {nodes}; compute ops on the CPU: {r.compute_ops_on_cpu or 'none'}")
        print(f"  KV buffers (IOBinding): {r.kv_device}")
        graph = "CUDA graph" if r.cuda_graph else "fixed binding, no capture (not CUDA)"
        same = "same tokens" if r.graph_same_tokens else "DIFFERENT tokens"
        steps = ", ".join(f"{c}: {ms} ms/tok" for c, ms in r.graph_decode_ms.items())
        print(f"  decode with {graph}: {steps} ({same})")
    print(
        f"\n{'context':>8}"
        + "".join(f"{r.variant + ' prefill':>18}{r.variant + ' decode':>18}" for r in reports)
    )
    for ctx in contexts:
        cells = "".join(f"{r.prefill_ms[ctx]:>15} ms{r.decode_ms[ctx]:>12} ms/tok" for r in reports)
        print(f"{ctx:>8}{cells}")


def main(argv: list[str] | None = None) -> int:
    from inference.paths import model_dir

    parser = gpu_bench_parser(__doc__)
    parser.add_argument("--contexts", default="256,1024,4096")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    contexts = [int(c) for c in args.contexts.split(",")]
    ok = require_gpu("gpu_check", args.allow_cpu, "check")
    if ok is None:
        return NO_GPU
    root = model_dir(args.model)
    reports = [measure(root / v, contexts, ok, args.reps) for v in ("fast", "standard")]
    print_report(reports, contexts)
    failed = [f"{r.variant} not wholly on the GPU" for r in reports if ok and not r.on_gpu]
    failed += [
        f"{r.variant} decodes other tokens with graphs" for r in reports if not r.graph_same_tokens
    ]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.__dict__ for r in reports], indent=2))
    if failed:
        print(f"gpu_check: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
