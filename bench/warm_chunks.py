"""What the background prefill's chunk size costs: a 1,500-token prompt (argparse.py) prefilled
from an empty KV cache by the fast model in chunks of 32, 64, 128 and 256 tokens, twice each.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.warm_chunks

A key that arrives mid-prefill waits for at most one chunk, so the chunk is sized to about
T_WARM_CHUNK_MS of work at the measured rate (inference.serving.warm_chunk_tokens); smaller chunks
read the weights more often per token.
"""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

from inference.engine import Engine, EngineConfig
from inference.generate import Generation, GenerationConfig
from inference.router import FAST
from models.choice import selected_model

CHUNKS = (32, 64, 128, 256)
PROMPT_TOKENS = 1500


def main() -> int:
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    model = engine.load(FAST)
    ids = model.tokenizer.encode(text)[:PROMPT_TOKENS]
    Generation(model, ids[:300], GenerationConfig(max_new_tokens=0)).run()  # first-run costs
    print(f"{model.model_id}, {len(ids)} tokens from an empty KV cache\n")
    print("| chunk (tokens) | run | ms per token | ms per chunk |")
    print("|---|---|---|---|")
    for run in (1, 2):
        for chunk in CHUNKS:
            model.pool.clear()
            started = time.perf_counter()
            config = GenerationConfig(max_new_tokens=0, prefill_chunk=chunk)
            Generation(model, ids, config).run()
            seconds = time.perf_counter() - started
            per_chunk = seconds / (len(ids) / chunk) * 1000
            print(f"| {chunk} | {run} | {seconds / len(ids) * 1000:.2f} | {per_chunk:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
