"""Engine benchmark: prefill, decode, KV reuse, RSS and prompt-lookup speed-up, one table per run.

    python bench/engine.py [--model NAME] [--reps 5] [--json bench/results/engine.json]
                           [--baseline NAME]  # another build's standard model as one more row
                           [--compare HOME]  # the same model built into another FASTCOMPLETE_HOME

Every model runs in its own subprocess (clean RSS, no cache interference), one after another on
the same machine in one run, so the ratios between them are what to read. Medians throughout.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import json
import multiprocessing as mp
import resource
import statistics
import sysconfig
import time
from pathlib import Path
from typing import Any

from inference.tuning import PREFILL_CHUNK_TOKENS

CONTEXTS = (256, 512, 1024, 2048)
DECODE_STEPS = 16
REUSE_PREFIX, REUSE_NEW = 1000, 10
CORPUS_FILES = ("argparse.py", "dataclasses.py", "inspect.py", "typing.py")


def corpus_text() -> str:
    """Real code no one here wrote: Python standard-library modules on this machine."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join((stdlib / f).read_text() for f in CORPUS_FILES)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


class OrtSubject:
    def __init__(self, directory: Path) -> None:
        from inference.model import load_model_dir

        self.model = load_model_dir(directory)

    def encode(self, text: str) -> list[int]:
        return self.model.tokenizer.encode(text)

    def prefill(self, ids: list[int]) -> float:
        self.model.pool.clear()
        slot, _ = self.model.pool.lease(ids)
        started = time.perf_counter()
        pending = ids
        while pending:
            self.model.runner.forward(slot, pending[:PREFILL_CHUNK_TOKENS])
            pending = pending[PREFILL_CHUNK_TOKENS:]
        elapsed = time.perf_counter() - started
        self.model.pool.release(slot)
        return elapsed

    def decode(self, ids: list[int], steps: int) -> list[float]:
        self.model.pool.clear()
        slot, _ = self.model.pool.lease(ids)
        pending = ids
        while pending:
            logits = self.model.runner.forward(slot, pending[:PREFILL_CHUNK_TOKENS])
            pending = pending[PREFILL_CHUNK_TOKENS:]
        times = []
        for _ in range(steps):
            token = int(logits[-1].argmax())
            started = time.perf_counter()
            logits = self.model.runner.forward(slot, [token])
            times.append(time.perf_counter() - started)
        self.model.pool.release(slot)
        return times

    def reuse(self, prefix: list[int], new: list[int]) -> float:
        self.model.pool.clear()
        self.prefill(prefix)  # leaves the prefix in the pool
        slot, reused = self.model.pool.lease(prefix + new)
        assert reused == len(prefix), reused
        started = time.perf_counter()
        self.model.runner.forward(slot, (prefix + new)[reused:])
        elapsed = time.perf_counter() - started
        self.model.pool.release(slot)
        return elapsed


class TorchSubject:
    def __init__(self, hf_dir: Path, threads: int) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
        self.tokenizer = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def _forward(self, ids: list[int], past: Any = None) -> Any:
        with self.torch.no_grad():
            return self.model(
                self.torch.tensor([ids]), past_key_values=past, use_cache=True, logits_to_keep=1
            )

    def prefill(self, ids: list[int]) -> float:
        started = time.perf_counter()
        self._forward(ids)
        return time.perf_counter() - started

    def decode(self, ids: list[int], steps: int) -> list[float]:
        out = self._forward(ids)
        times = []
        for _ in range(steps):
            token = int(out.logits[0, -1].argmax())
            started = time.perf_counter()
            out = self._forward([token], out.past_key_values)
            times.append(time.perf_counter() - started)
        return times

    def reuse(self, prefix: list[int], new: list[int]) -> float:
        return float("nan")  # transformers keeps no cross-request prefix cache


def lookup_speedup(directory: Path, text: str, positions: int = 8) -> dict[str, Any]:
    """Greedy decode of 48 tokens after ~1000 tokens of real code at 8 places, drafts off vs on."""
    from inference.generate import Generation, GenerationConfig
    from inference.model import load_model_dir

    model = load_model_dir(directory)
    lines = text.split("\n")
    plain_s = drafted_s = 0.0
    identical = 0
    accepted = drafted = tokens = 0
    for i in range(positions):
        cut = len(lines) // 4 + i * (len(lines) // (2 * positions))
        prompt = model.tokenizer.encode("\n".join(lines[:cut]) + "\n")[-1000:]
        runs = []
        for draft in (0, 8):
            Generation(model, prompt, GenerationConfig(max_new_tokens=0)).run()  # warm prefix
            gen = Generation(model, prompt, GenerationConfig(max_new_tokens=48, draft_tokens=draft))
            result = gen.run()
            runs.append(result)
        plain, spec = runs
        plain_s += plain.total_s - plain.prefill_s
        drafted_s += spec.total_s - spec.prefill_s
        identical += plain.token_ids == spec.token_ids
        accepted += spec.accepted
        drafted += spec.drafted
        tokens += spec.new_tokens
    return {
        "positions": positions,
        "speedup": round(plain_s / drafted_s, 2),
        "effective_ms_per_token": round(drafted_s / tokens * 1000, 2),
        "identical_outputs": identical,
        "acceptance": round(accepted / drafted, 3) if drafted else None,
    }


def bench_subject(
    kind: str, path: str, reps: int, threads: int, queue: Any, contexts: tuple[int, ...] = CONTEXTS
) -> None:
    started_rss = rss_mb()
    subject = OrtSubject(Path(path)) if kind == "onnx" else TorchSubject(Path(path), threads)
    ids = subject.encode(corpus_text())
    row: dict[str, Any] = {"load_rss_mb": round(rss_mb() - started_rss, 1)}
    subject.prefill(ids[:64])  # warm-up: first-run allocations and kernel selection
    for ctx in contexts:
        row[f"prefill_{ctx}_ms"] = _median_ms([subject.prefill(ids[:ctx]) for _ in range(reps)])
        row[f"decode_{ctx}_ms"] = _median_ms(subject.decode(ids[:ctx], DECODE_STEPS))
    if contexts != CONTEXTS:  # a partial run (bench/block_size.py): no reuse figures
        queue.put(row)
        return
    prefix, new = ids[:REUSE_PREFIX], ids[REUSE_PREFIX : REUSE_PREFIX + REUSE_NEW]
    reuse = [subject.reuse(prefix, new) for _ in range(reps)]
    row["reuse_1000+10_ms"] = _median_ms(reuse) if reuse[0] == reuse[0] else None
    full = [subject.prefill(prefix + new) for _ in range(reps)]
    row["full_1010_ms"] = _median_ms(full)
    if row["reuse_1000+10_ms"] is not None:
        row["reuse_ratio"] = round(row["reuse_1000+10_ms"] / row["full_1010_ms"], 4)
    row["peak_rss_mb"] = round(rss_mb(), 1)
    queue.put(row)


def run_isolated(
    kind: str, path: Path, reps: int, threads: int, contexts: tuple[int, ...] = CONTEXTS
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=bench_subject, args=(kind, str(path), reps, threads, queue, contexts))
    proc.start()
    row = queue.get()
    proc.join()
    return row


def print_table(rows: dict[str, dict[str, Any]]) -> None:
    keys = [k for k in next(iter(rows.values())) if k != "load_rss_mb"]
    names = list(rows)
    width = max(14, *(len(n) + 2 for n in names))
    print(f"{'metric':<22}" + "".join(f"{n:>{width}}" for n in names))
    for key in keys:
        cells = "".join(f"{rows[n].get(key, '-')!s:>{width}}" for n in names)
        print(f"{key:<22}{cells}")


def targets(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    fast, std, ref = rows.get("fast"), rows.get("standard"), rows.get("pytorch")
    out: dict[str, Any] = {}
    for ctx in (256, 512):
        if fast and std:
            out[f"fast/standard decode @{ctx} (<=0.5)"] = round(
                fast[f"decode_{ctx}_ms"] / std[f"decode_{ctx}_ms"], 3
            )
        if fast and ref:
            out[f"fast/pytorch decode @{ctx} (<=0.35)"] = round(
                fast[f"decode_{ctx}_ms"] / ref[f"decode_{ctx}_ms"], 3
            )
    if fast and ref:
        out["fast/pytorch prefill 1024 (<=0.8)"] = round(
            fast["prefill_1024_ms"] / ref["prefill_1024_ms"], 3
        )
    if std and ref:
        out["standard/pytorch prefill 1024"] = round(
            std["prefill_1024_ms"] / ref["prefill_1024_ms"], 3
        )
    base = rows.get("baseline")
    if std and base:
        for ctx in (256, 1024):
            out[f"baseline/standard decode @{ctx} (>=1.5)"] = round(
                base[f"decode_{ctx}_ms"] / std[f"decode_{ctx}_ms"], 2
            )
    if fast:
        out["fast reuse/full prefill (<=0.05)"] = fast.get("reuse_ratio")
    for variant in ("fast", "standard"):
        this, other = rows.get(variant), rows.get(f"{variant}@compare")
        if this and other:
            for key in ("decode_256_ms", "decode_1024_ms", "decode_2048_ms", "prefill_1024_ms"):
                out[f"{variant} {key} this/compare (<=1.05)"] = round(this[key] / other[key], 3)
    return out


def build_figures(root: Path, text: str) -> dict[str, Any]:
    """What a build costs and keeps: its time, file sizes, and fast-vs-standard agreement and NLL
    teacher-forced on stdlib code (2048 tokens, beside the build's own 511-token sample)."""
    import numpy as np

    from inference.manifest import read_manifest
    from inference.model import load_model_dir
    from inference.paths import MODEL_FILE
    from models.validate import agreement

    manifest = read_manifest(root / "fast")
    sizes = {
        v: round(sum(f.stat().st_size for f in (root / v).glob("model.onnx*")) / 1e6, 1)
        for v in ("fast", "standard")
    }
    ids = np.array(load_model_dir(root / "fast").tokenizer.encode(text)[:2048], dtype=np.int64)
    stdlib = agreement(root / "standard" / MODEL_FILE, root / "fast" / MODEL_FILE, ids)
    return {
        "build_s": manifest.build_seconds,
        "fast_mb": sizes["fast"],
        "standard_mb": sizes["standard"],
        "agreement_sample": manifest.validation["top1_agreement"],
        "nll_fast_sample": manifest.validation["nll_fast"],
        "agreement_stdlib": round(stdlib.top1_agreement, 4),
        "nll_std_stdlib": stdlib.nll_standard,
        "nll_fast_stdlib": stdlib.nll_fast,
    }


def main() -> int:
    from inference.paths import model_dir
    from inference.session import default_threads
    from models.choice import selected_model

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=selected_model())
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    parser.add_argument("--json", type=Path, default=Path("bench/results/engine.json"))
    parser.add_argument(
        "--baseline", help="a build whose standard model is measured too (e.g. an older graph)"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="another FASTCOMPLETE_HOME holding the same model built another way (an older graph): "
        "its rows are measured in this run too, with build time, sizes, agreement and NLL",
    )
    args = parser.parse_args()
    root = model_dir(args.model)
    builds = {"this": root}
    if args.compare:
        builds["compare"] = args.compare / "models" / args.model
    if not (root / "fast").is_dir():
        print(f"no model at {root}: run `fastcomplete models build`", file=sys.stderr)
        return 1
    threads = default_threads()
    rows: dict[str, dict[str, Any]] = {}
    for label, build_root in builds.items():
        for variant in ("fast", "standard"):
            name = variant if label == "this" else f"{variant}@{label}"
            rows[name] = run_isolated("onnx", build_root / variant, args.reps, threads)
            print(f"{name}: done", file=sys.stderr, flush=True)
    if args.baseline:
        rows["baseline"] = run_isolated(
            "onnx", model_dir(args.baseline) / "standard", args.reps, threads
        )
    try:
        import torch  # noqa: F401

        have_torch = (root / "hf").is_dir() and not args.no_torch
    except ImportError:
        have_torch = False
    if have_torch:
        rows["pytorch"] = run_isolated("torch", root / "hf", args.reps, threads)
    print(f"\nengine benchmark: {args.model}, {threads} threads, medians of {args.reps} runs\n")
    print_table(rows)
    lookup = lookup_speedup(root / "fast", corpus_text())
    print(
        f"\nprompt lookup (fast model, 48 tokens at {lookup['positions']} positions in stdlib code):"
    )
    print(
        f"  decode speed-up {lookup['speedup']}x, acceptance {lookup['acceptance']}, "
        f"identical outputs {lookup['identical_outputs']}/{lookup['positions']}, "
        f"{lookup['effective_ms_per_token']} ms per generated token"
    )
    text = corpus_text()
    figures = {label: build_figures(path, text) for label, path in builds.items()}
    print("\nbuilds:")
    print_table(figures)
    checks = targets(rows)
    if "pytorch" in rows:
        ref = rows["pytorch"]["decode_1024_ms"]
        checks["fast with lookup / pytorch decode (<=0.35)"] = round(
            lookup["effective_ms_per_token"] / ref, 3
        )
    print("\ntargets (ratios measured in this run):")
    for name, value in checks.items():
        print(f"  {name:<40} {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {"model": args.model, "threads": threads, "reps": args.reps, "rows": rows}
    report.update(prompt_lookup=lookup, targets=checks, time=time.strftime("%Y-%m-%d %H:%M"))
    report["builds"] = figures
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
