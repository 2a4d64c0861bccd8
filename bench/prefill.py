"""Where a long prefill's time goes: ORT's profile per operator, and the chunk size's effect.

    python -m bench.prefill [--model NAME] [--tokens 1024]

For each variant (fast, standard): the prefill of `--tokens` tokens in 128/256/512/whole chunks
(median of 3), then one profiled prefill in the default chunks with the time per operator type.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from inference.tuning import PREFILL_CHUNK_TOKENS


def chunk_times(directory: Path, tokens: int) -> dict[int, float]:
    from inference.kv_cache import PoolConfig
    from inference.model import load_model_dir

    model = load_model_dir(directory, pool_config=PoolConfig(capacity_tokens=tokens + 64))
    ids = [(i * 7919) % 40000 + 100 for i in range(tokens)]
    out = {}
    for chunk in (128, 256, 512, tokens):
        samples = []
        for _ in range(3):
            model.pool.clear()
            slot, _ = model.pool.lease(ids)
            started = time.perf_counter()
            for i in range(0, tokens, chunk):
                model.runner.forward(slot, ids[i : i + chunk])
            samples.append(time.perf_counter() - started)
            model.pool.release(slot)
        out[chunk] = round(statistics.median(samples) * 1000)
    return out


def op_profile(directory: Path, tokens: int) -> dict[str, float]:
    import onnxruntime as ort

    from inference.graph import inspect_graph
    from inference.kv_cache import KVPool, PoolConfig
    from inference.runner import Runner
    from inference.session import CPU, SessionConfig, session_options

    opts = session_options(SessionConfig())
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "prefill")
        session = ort.InferenceSession(
            str(directory / "model.onnx"), sess_options=opts, providers=[CPU]
        )
        spec = inspect_graph(session)
        pool = KVPool(spec, True, PoolConfig(capacity_tokens=tokens + 64))
        runner, (slot, _) = Runner(session, spec), pool.lease([0])
        ids = [(i * 7919) % 40000 + 100 for i in range(tokens)]
        for i in range(0, tokens, PREFILL_CHUNK_TOKENS):
            runner.forward(slot, ids[i : i + PREFILL_CHUNK_TOKENS])
        events = json.loads(Path(session.end_profiling()).read_text())
    by_op: collections.Counter = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_op[event["args"]["op_name"]] += event["dur"]
    return {op: round(us / 1000, 1) for op, us in by_op.most_common(6)}


def main() -> int:
    from inference.paths import model_dir
    from models.choice import selected_model

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=selected_model())
    parser.add_argument("--tokens", type=int, default=1024)
    args = parser.parse_args()
    for variant in ("fast", "standard"):
        directory = model_dir(args.model) / variant
        chunks = chunk_times(directory, args.tokens)
        print(f"{variant}: prefill of {args.tokens} tokens by chunk size (ms): {chunks}")
        ops = op_profile(directory, args.tokens)
        total = sum(ops.values())
        shares = ", ".join(f"{op} {ms} ms ({100 * ms / total:.0f}%)" for op, ms in ops.items())
        print(f"  profiled, {PREFILL_CHUNK_TOKENS}-token chunks: {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
