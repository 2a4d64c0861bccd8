"""Which weights make the fast model fastest on this device, at a quality the build accepts.

    python -m bench.fast_choice [--model NAME] [--bits 16,8,4] [--context 1024] [--json FILE]

For each candidate (16: the build's standard graph, FP16 on a CUDA build; 8 and 4: MatMulNBits
weights, the build's own fast graph when it has those bits, else built once from the build's hf/
folder under MODEL/candidates/) it measures decode ms per token after `--context` tokens (CUDA
graphs on where the session can capture them) and teacher-forced top-1 agreement with the
standard graph on the build's sample text. It only measures: the pick (models/fast_choice.py:
the fastest candidate whose agreement passes the build's gate for its bits) is the build's, and
`fastcomplete models build --cuda --fast-choice FILE` builds it and records the measurements in
the manifest. Without a GPU it says so and exits 2, unless `--allow-cpu`.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from models.fast_choice import BitsCandidate, choose, report

DECODE_STEPS = 32


def candidate_graph(root: Path, bits: int, cuda: bool) -> Path:
    """The graph with `bits` weights: the build's own, or one built once beside it."""
    from inference.manifest import read_manifest
    from inference.paths import MODEL_FILE
    from models.genai_build import NBitsScheme, build_graph, builder_python

    if bits == 16:
        return root / "standard" / MODEL_FILE
    fast = read_manifest(root / "fast")
    if (fast.quantization or {}).get("bits") == bits:
        return root / "fast" / MODEL_FILE
    out = root / "candidates" / f"int{bits}"
    if not (out / MODEL_FILE).is_file():
        build_graph(root / "hf", out, NBitsScheme(bits=bits), builder_python(), cuda)
    return out / MODEL_FILE


def decode_ms(graph: Path, context: int, gpu: bool) -> float:
    """Median ms per decode step after `context` tokens, as the server runs it."""
    from inference.graph import inspect_graph
    from inference.kv_cache import KVPool, PoolConfig
    from inference.runner import Runner
    from inference.session import SessionConfig, create_session, on_gpu
    from models.measure import synthetic_ids, timed_run

    session = create_session(graph, SessionConfig(prefer_gpu=gpu))
    spec = inspect_graph(session)
    device = "cuda" if on_gpu(session) else "cpu"
    pool = KVPool(spec, True, PoolConfig(capacity_tokens=context + 2 * DECODE_STEPS, device=device))
    runner, (slot, _) = Runner(session, spec), pool.lease([0])
    run = timed_run(runner, slot, synthetic_ids(context), DECODE_STEPS)
    return round(statistics.median(run.decode_s[2:]) * 1000, 3)  # the first steps capture the graph


def measure(root: Path, bits: list[int], context: int, gpu: bool) -> list[BitsCandidate]:
    from inference.manifest import GENAI_CUDA_GRAPH, read_manifest
    from inference.paths import MODEL_FILE
    from models.validate import agreement, agreement_gate, sample_ids

    manifest = read_manifest(root / "standard")
    cuda = manifest.graph == GENAI_CUDA_GRAPH
    bos = manifest.bos_token_id if manifest.bos_policy == "always" else None
    ids = sample_ids(root / "standard" / "tokenizer.json", bos)
    standard = root / "standard" / MODEL_FILE
    rows = []
    for b in bits:
        graph = candidate_graph(root, b, cuda)
        agree = 1.0 if b == 16 else agreement(standard, graph, ids, gpu).top1_agreement
        gate = agreement_gate(b)
        rows.append(
            BitsCandidate(b, str(graph), decode_ms(graph, context, gpu), round(agree, 4), gate)
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    from bench.gpu_check import NO_GPU, gpu_bench_parser, require_gpu
    from inference.paths import model_dir

    parser = gpu_bench_parser(__doc__)
    parser.add_argument("--bits", default="16,8,4")
    parser.add_argument("--context", type=int, default=1024)
    args = parser.parse_args(argv)
    ok = require_gpu("fast_choice", args.allow_cpu)
    if ok is None:
        return NO_GPU
    rows = measure(model_dir(args.model), [int(b) for b in args.bits.split(",")], args.context, ok)
    chosen = choose(rows)
    print(f"{'bits':>5}{'decode ms/tok':>15}{'agreement':>11}{'gate':>7}")
    for r in rows:
        mark = "  <- chosen" if r.bits == chosen else "" if r.passes else "  (below its gate)"
        print(f"{r.bits:>5}{r.decode_ms:>15}{r.agreement:>11}{r.gate:>7}{mark}")
    if args.json:
        data = report(args.model, "cuda" if ok else "cpu", args.context, rows)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
