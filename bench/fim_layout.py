"""What each keystroke re-prefills with a FIM prompt, by how much code after the cursor it holds.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.fim_layout [--keys 24]

A FIM prompt (prefix, suffix token, the code after the cursor, middle token) changes at the
cursor on every key, so everything after the cursor's token is computed again: the typed
character, the suffix and the middle token. Here one real line of argparse.py (the first 2,000
lines, the cursor at that line's start, the rest of the file after it) is typed a key at a time
through the server's own planning (`plan_at`, healing as the plan says); each key's
prompt is prefilled on top of the previous key's KV cache, and the tokens computed and the
milliseconds are reported per suffix budget (`FIM_SUFFIX_TOKENS`), medians over the keys.
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import threading
import time
from pathlib import Path

from inference.engine import Engine, EngineConfig
from inference.metrics import percentile
from inference.router import FAST
from lsp_server.completion import plan as completion_plan
from lsp_server.completion.plan import Cursor, plan_at
from lsp_server.config.settings import Settings
from lsp_server.prompting import context
from models.choice import selected_model

BUDGETS = (0, 48, 128, 256)
TYPED_LINE = 1200  # where in argparse.py the line being typed starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=24)
    args = parser.parse_args()
    source = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    lines = source.split("\n")[:2000]
    head, line, tail = lines[:TYPED_LINE], lines[TYPED_LINE], lines[TYPED_LINE + 1 :]
    indent = len(line) - len(line.lstrip())
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    model = engine.load(FAST)
    if model.manifest.fim is None:
        print(f"{model.model_id} has no FIM template: nothing to measure")
        return 2
    settings = Settings(multiline="never")
    print(f"{model.model_id}: typing {line.strip()[: args.keys]!r} (line {TYPED_LINE + 1})\n")
    print(
        "| suffix budget (tokens) | prompt tokens | computed per key p50 | ms per key p50 | p95 |"
    )
    print("|---|---|---|---|---|")
    for budget in BUDGETS:
        context.FIM_SUFFIX_TOKENS = budget
        completion_plan.T_KEY_SUFFIX_MS = float("inf")  # the budget asked, not the rate's
        computed, ms, sizes = [], [], []
        for k in range(args.keys + 1):
            typed = line[: indent + k]
            text = "\n".join([*head, typed + "\n" + "\n".join(tail)])
            at = Cursor(text, TYPED_LINE, len(typed), "python", "file:///cpython/Lib/argparse.py")
            plan = plan_at(engine, at, settings)
            started = time.perf_counter()
            done = engine.warm(
                plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal
            )
            if k:  # the first key only fills the cache
                computed.append(done)
                ms.append((time.perf_counter() - started) * 1000)
                sizes.append(len(plan.tokens.ids))
        p95 = percentile(ms, 0.95)
        print(
            f"| {budget} | {statistics.median(sizes):.0f} | {statistics.median(computed):.0f} | "
            f"{statistics.median(ms):.0f} | {p95:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
