"""Keeping a FIM suffix's KV across keystrokes: what it saves per key and what it costs in exact
match, on held-out positions.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.tail_reuse [--positions 10]

A FIM prompt puts the code after the cursor behind the cursor, so a key that adds a token before
it moves the whole suffix by a position or two, and an exact KV cache computes it again (~130
tokens, a few hundred ms on 2 cores). llama.cpp's server (`--cache-reuse`, what llama.vim and
llama.vscode run) instead shifts the cached span to its new positions; its keys are rotated
again and its values kept, though they were computed before the key was typed. Here
(`PoolConfig.shift_tail`) the same, measured both ways on the eval repositories' positions (one
per file, cut inside a line, its rest deleted): the last `--keys` characters before the cursor
are typed one at a time, each key's prompt prefilled on the previous one's cache (as the
background prefill does while a person types), then the completion at the cursor is generated.
Printed: per-key prefill (ms, tokens computed), exact match and edit similarity of the final
answer, and how often the two configurations answer alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path

from bench.lsp_replay import percentile
from bench.warm_open import default_repos, one_per_file
from inference.engine import Engine, EngineConfig
from inference.router import FAST
from lsp_server.cli.evaluation import EVAL_SETTINGS, Case, edit_similarity
from lsp_server.completion import plan as completion_plan
from lsp_server.completion.plan import Cursor, plan_at
from lsp_server.completion.run import run_completion
from lsp_server.prompting import context
from models.choice import selected_model

# (move the cached suffix, the FIM order)
CONFIGS = {
    "exact KV (today)": (False, "psm"),
    "suffix KV moved (llama.cpp --cache-reuse)": (True, "psm"),
    "suffix first (SPM), exact KV": (False, "spm"),
}


def typed_steps(case: Case, keys: int) -> list[tuple[str, int, int]]:
    """(document, line, character) before each of the last `keys` characters and at the cursor."""
    lines = case.document.split("\n")
    prefix = lines[case.line]
    start = max(len(prefix) - keys, len(prefix) - len(prefix.lstrip()))
    steps = []
    for end in range(start, len(prefix) + 1):
        doc = "\n".join([*lines[: case.line], prefix[:end], *lines[case.line + 1 :]])
        steps.append((doc, case.line, len(prefix[:end].encode("utf-16-le")) // 2))
    return steps


def run(engine: Engine, cases: list[Case], keys: int) -> dict:
    model = engine.load(FAST)
    per_key_ms: list[float] = []
    per_key_tokens: list[int] = []
    answers: list[str] = []
    exact = 0
    similarity = 0.0
    for case in cases:
        model.pool.clear()
        steps = typed_steps(case, keys)
        uri = Path(case.path).as_uri()
        for i, (doc, line, character) in enumerate(steps):
            at = Cursor(doc, line, character, case.language, uri)
            plan = plan_at(engine, at, EVAL_SETTINGS)
            if plan.serving is None or not plan.prompt.strip():
                break
            started = time.perf_counter()
            computed = engine.warm(
                plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal
            )
            if i > 0:  # the first prefill is the file's whole prompt, not a key
                per_key_ms.append((time.perf_counter() - started) * 1000)
                per_key_tokens.append(computed)
            if i == len(steps) - 1:
                done = run_completion(engine, plan, doc, case.language, cancel=threading.Event())
                answers.append(done.text)
                exact += done.text.rstrip() == case.expected.rstrip()
                similarity += edit_similarity(done.text, case.expected)
    n = len(cases)
    return {
        "positions": n,
        "keys": len(per_key_ms),
        "per_key_ms_p50": percentile(per_key_ms, 0.5),
        "per_key_ms_p95": percentile(per_key_ms, 0.95),
        "per_key_tokens_p50": statistics.median(per_key_tokens) if per_key_tokens else None,
        "exact": exact,
        "exact_share": round(exact / n, 3) if n else None,
        "edit_similarity": round(100 * similarity / n, 1) if n else None,
        "answers": answers,
    }


def print_table(results: dict, positions: int, keys: int) -> None:
    print(f"\n{positions} positions, the last {keys} characters typed a key at a time")
    print("| config | per-key prefill p50 / p95 ms | tokens per key p50 | exact | edit sim |")
    print("|---|---|---|---|---|")
    for label, r in results.items():
        print(
            f"| {label} | {r['per_key_ms_p50']} / {r['per_key_ms_p95']} | "
            f"{r['per_key_tokens_p50']} | {r['exact']} of {r['positions']} "
            f"({100 * (r['exact_share'] or 0):.1f}%) | {r['edit_similarity']} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--positions", type=int, default=10, help="per repository")
    parser.add_argument("--keys", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--suffix-tokens",
        default="",
        help="comma-separated FIM suffix budgets: a row each, exact KV (instead of the configs)",
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/tail_reuse.json"))
    args = parser.parse_args()
    cases = [c for root in default_repos() for c in one_per_file(root, args.positions, args.seed)]
    results = {}
    if args.suffix_tokens:
        for size in [int(s) for s in args.suffix_tokens.split(",")]:
            context.FIM_SUFFIX_TOKENS = size
            completion_plan.T_KEY_SUFFIX_MS = float("inf")  # the size asked, not the rate's
            engine = Engine(
                EngineConfig(
                    model_name=selected_model(),
                    cache_dir=None,
                    cache_memory_items=0,
                    kv_store_dir=None,
                )
            )
            results[f"suffix budget {size} tokens"] = run(engine, cases, args.keys)
        print_table(results, len(cases), args.keys)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"results": results}, indent=1))
        return 0
    for label, (shift, order) in CONFIGS.items():
        base = EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
        engine = Engine(replace(base, pool=replace(base.pool, shift_tail=shift)))
        fim = engine.load(FAST).manifest.fim
        if fim is None:
            print(f"{label}: the model has no FIM template; nothing to measure")
            return 2
        fim.order = order  # the loaded manifest only: what the prompt builder and healing read
        started = time.perf_counter()
        results[label] = run(engine, cases, args.keys)
        print(f"done: {label} ({time.perf_counter() - started:.0f} s)", flush=True)
    first, second, _ = (results[k]["answers"] for k in CONFIGS)
    alike = sum(a == b for a, b in zip(first, second, strict=True))
    print_table(results, len(cases), args.keys)
    print(f"the first two answer alike at {alike} of {len(cases)} positions")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"results": results, "alike": alike}, indent=1))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
