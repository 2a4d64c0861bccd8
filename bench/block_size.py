"""Fast models built with different MatMulNBits block sizes, against the PyTorch reference.

    fastcomplete models build --name smollm2-135m-b128 --block-size 128
    python -m bench.block_size smollm2-135m smollm2-135m-b128 [--rounds 2]

Each model runs in a process of its own, in interleaved rounds (shared machines drift): prefill
of 1024 tokens (median of 5) and decode ms/token at 256 and 512 context (median of 16 steps),
plus the agreement and NLL that the build's validation recorded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from bench.engine import run_isolated
from inference.manifest import read_manifest
from inference.paths import model_dir

KEYS = ("prefill_1024_ms", "decode_256_ms", "decode_512_ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="model names under $FASTCOMPLETE_HOME/models")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    subjects = [("pytorch", "torch", model_dir(args.models[0]) / "hf")]
    subjects += [(name, "onnx", model_dir(name) / "fast") for name in args.models]
    for _, _, path in subjects:
        if not path.is_dir():
            print(f"missing {path}: build it with `fastcomplete models build`", file=sys.stderr)
            return 1
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in subjects}
    for _ in range(args.rounds):
        for name, kind, path in subjects:
            runs[name].append(run_isolated(kind, path, 5, 2, contexts=(256, 512, 1024)))
    print(
        f"{'model':<22}{'block':>6}{'agreement':>10}{'NLL':>8}" + "".join(f"{k:>17}" for k in KEYS)
    )
    torch_prefill = statistics.median(r["prefill_1024_ms"] for r in runs["pytorch"])
    for name, kind, path in subjects:
        block, agree, nll = "-", "-", "-"
        if kind == "onnx":
            manifest = read_manifest(path)
            block = str((manifest.quantization or {}).get("block_size"))
            agree = f"{manifest.validation['top1_agreement']:.4f}"
            nll = f"{manifest.validation['nll_fast']:.3f}"
        cells = "".join(
            f"{'/'.join(str(round(r[k])) if k.startswith('prefill') else str(r[k]) for r in runs[name]):>17}"
            for k in KEYS
        )
        print(f"{name:<22}{block:>6}{agree:>10}{nll:>8}{cells}")
        if kind == "onnx":
            prefill = statistics.median(r["prefill_1024_ms"] for r in runs[name])
            print(f"{'':<22}prefill 1024 / PyTorch: {prefill / torch_prefill:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
