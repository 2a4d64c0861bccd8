"""An explanation on the standard model: time to the first token and tokens per second.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.explain_speed [--reps 2]

The prompt is the server's own (lsp_server/chat/prompts.py, rendered with the model's chat template)
for a ~40-line function of this project; up to 300 new tokens, greedy; the completion cache is
off. Medians over the runs; the first run after loading is measured too (a person's first
explain).
"""

from __future__ import annotations

import argparse
import statistics
import threading
from dataclasses import replace
from pathlib import Path

from inference.engine import Engine, EngineConfig
from inference.router import STANDARD, Task
from lsp_server.chat.prompts import EXPLAIN_CONFIG, explain_messages
from models.choice import selected_model

CODE_FILE = Path(__file__).resolve().parent.parent / "lsp_server" / "context.py"
NEW_TOKENS = 300


def sample_code() -> str:
    text = CODE_FILE.read_text()
    start = text.index("def window_start(")
    return "\n".join(text[start:].split("\n")[:40])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    model = engine.load(STANDARD)
    config = replace(EXPLAIN_CONFIG, max_new_tokens=NEW_TOKENS)
    route = engine.route(Task.EXPLAIN, fast_mode=False)
    ttft, rate, tokens = [], [], []
    for _ in range(args.reps):
        result = engine.generate(
            Task.EXPLAIN,
            "",
            config,
            route=route,
            messages=explain_messages(sample_code(), "python"),
            cancel=threading.Event(),
        )
        gen = result.generation
        assert gen is not None and gen.ttft_s is not None
        ttft.append(gen.ttft_s * 1000)
        tokens.append(gen.new_tokens)
        rate.append(1 / gen.tpot_s if gen.tpot_s else 0.0)
    print(
        f"{model.model_id}: prompt {gen.prompt_tokens} tokens, {statistics.median(tokens):.0f} new; "
        f"first token {statistics.median(ttft):.0f} ms (first run {ttft[0]:.0f}), "
        f"{statistics.median(rate):.1f} tokens/s after it"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
