"""The ceiling the product must reach: a plain, healed FIM prompt on the eval's own positions.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.fim_ceiling DIR [--n 20]

The positions are `fastcomplete eval --workspace DIR`'s (same seed, same cut lines). The prompt
is the bare FIM form, nothing from other files and no context builder: `<|fim_prefix|>` + the
last 1,200 tokens before the cursor + `<|fim_suffix|>` + the first 300 tokens after it +
`<|fim_middle|>`, healed at the cursor as the server heals (the prefix's last token backed off,
the first generated tokens constrained to re-spell it), greedy, up to the end of the line. Only
the minimal clean-up (special tokens, the first line, trailing space) is applied. Reported per
model variant next to nothing else: compare with `eval --workspace` on the same DIR and seed.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from inference.engine import Engine, EngineConfig
from inference.generate import GenerationConfig
from inference.router import FAST, Task
from lsp_server.cli.evaluation import Scores, tally, workspace_cases
from lsp_server.completion.postprocess import MINIMAL, Site, postprocess
from lsp_server.prompting.context import plain_text
from lsp_server.text.positions import offset_at
from lsp_server.workspace.exclusions import Exclusions

BEFORE_TOKENS, AFTER_TOKENS = 1200, 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="fast", help="fast, standard or both")
    args = parser.parse_args()
    root = args.workspace.resolve()
    cases = workspace_cases(root, args.n, args.seed, Exclusions(root))
    engine = Engine(EngineConfig(cache_dir=None, cache_memory_items=0, kv_store_dir=None))
    print(f"plain healed FIM prompt, {len(cases)} positions of {root}\n")
    print(
        "| model | exact match % | edit similarity % | mid-word exact % (n) | between exact % (n) |"
    )
    print("|---|---|---|---|---|")
    for variant in args.models.split(","):
        model = engine.load(variant)
        fim, tok = model.manifest.fim, model.tokenizer
        if fim is None:
            print(f"| {model.model_id} | (no FIM template) | | | |")
            continue
        route = engine.route(Task.COMPLETION, fast_mode=variant == FAST)
        scores = Scores()
        for case in cases:
            offset = offset_at(case.document, case.line, case.character)
            before = tok.encode(plain_text(case.document[:offset], fim), bos=False)[-BEFORE_TOKENS:]
            after = tok.encode(plain_text(case.document[offset:], fim), bos=False)[:AFTER_TOKENS]
            ids = [tok.special_id(fim.prefix), *before, tok.special_id(fim.suffix), *after]
            ids.append(tok.special_id(fim.middle))
            config = GenerationConfig(max_new_tokens=48, stop_at_newline=True, heal=True)
            result = engine.generate(
                Task.COMPLETION, ids, config, route=route, cancel=threading.Event()
            )
            line_prefix = case.document[:offset].rsplit("\n", 1)[-1]
            line_suffix = case.document[offset:].split("\n", 1)[0]
            shown = postprocess(result.text, Site(line_prefix, line_suffix, True), MINIMAL)
            tally(scores, case, shown, offset)
        s = scores.summary()
        print(
            f"| {model.model_id} | {s['exact_match']} | {s['edit_similarity']} | "
            f"{s['mid_word_exact']} ({s['mid_word_cases']}) | "
            f"{s['between_tokens_exact']} ({s['between_tokens_cases']}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
