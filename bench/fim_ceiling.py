"""The ceiling the product must reach: a plain, healed FIM prompt on the eval's own positions.

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.fim_ceiling DIR [--n 20]

The positions are `fastcomplete eval --workspace DIR`'s (same seed, same cut lines). The prompt
is the bare FIM form, nothing from other files and no context builder: `<|fim_prefix|>` + the
last 1,200 tokens before the cursor + `<|fim_suffix|>` + the first 300 tokens after it +
`<|fim_middle|>`, healed at the cursor as the server heals (the prefix's last token backed off,
the first generated tokens constrained to re-spell it), greedy, up to the end of the line. Only
the minimal clean-up (special tokens, the first line, trailing space) is applied. Reported per
model variant next to nothing else: compare with `eval --workspace` on the same DIR and seed.

    ... -m bench.fim_ceiling --unseen [--repos NAME,...] [--n 20] [--per-file 1]

takes bench/unseen.py's positions in the pinned repositories created in 2025 or later instead
(the same cut function and seed as `bench/unseen.py asks`; `bench/unseen.py ceiling --asks FILE`
puts this prompt's answers beside the product's per position), one row per repository and model.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import threading
from collections.abc import Callable
from pathlib import Path

from inference.engine import Engine, EngineConfig
from inference.generate import GenerationConfig
from inference.router import FAST, Task
from lsp_server.cli.evaluation import Case, Scores, tally, workspace_cases
from lsp_server.completion.postprocess import MINIMAL, Site, postprocess
from lsp_server.prompting.context import plain_text
from lsp_server.text.positions import offset_at
from lsp_server.workspace.exclusions import Exclusions
from models.choice import selected_model

BEFORE_TOKENS, AFTER_TOKENS = 1200, 300


def ceiling_answer(engine: Engine, variant: str, case: Case) -> str | None:
    """The plain healed FIM prompt's answer at `case` with the loaded `variant` (None: the model
    has no FIM template): the rest of the line, minimally cleaned."""
    model = engine.load(variant)
    fim, tok = model.manifest.fim, model.tokenizer
    if fim is None:
        return None
    route = engine.route(Task.COMPLETION, fast_mode=variant == FAST)
    offset = offset_at(case.document, case.line, case.character)
    before = tok.encode(plain_text(case.document[:offset], fim), bos=False)[-BEFORE_TOKENS:]
    after = tok.encode(plain_text(case.document[offset:], fim), bos=False)[:AFTER_TOKENS]
    ids = [tok.special_id(fim.prefix), *before, tok.special_id(fim.suffix), *after]
    ids.append(tok.special_id(fim.middle))
    config = GenerationConfig(max_new_tokens=48, stop_at_newline=True, heal=True)
    result = engine.generate(Task.COMPLETION, ids, config, route=route, cancel=threading.Event())
    line_prefix = case.document[:offset].rsplit("\n", 1)[-1]
    line_suffix = case.document[offset:].split("\n", 1)[0]
    return postprocess(result.text, Site(line_prefix, line_suffix, True), MINIMAL)


def new_engine() -> Engine:
    """The model alone: no completion cache, no KV store (nothing one position leaves helps
    another)."""
    return Engine(
        EngineConfig(
            model_name=selected_model(),
            cache_dir=None,
            cache_memory_items=0,
            kv_store_dir=None,
        )
    )


def load_ceiling(variants: list[str]) -> Callable[[str, Case], str]:
    """answer(variant, case), the variants loaded once; a model without a FIM template is an
    error here (there is no ceiling to compare with)."""
    engine = new_engine()
    for variant in variants:
        if engine.load(variant).manifest.fim is None:
            raise SystemExit(f"{variant}: the model has no FIM template")

    def answer(variant: str, case: Case) -> str:
        return ceiling_answer(engine, variant, case) or ""

    return answer


def score_rows(
    engine: Engine, variants: list[str], groups: dict[str, list[Case]]
) -> list[tuple[str, str, dict | None]]:
    """(group, model id, summary or None without a FIM template) per group and variant."""
    rows = []
    for variant in variants:
        model = engine.load(variant)
        for name, cases in groups.items():
            if model.manifest.fim is None:
                rows.append((name, model.model_id, None))
                continue
            scores = Scores()
            for case in cases:
                shown = ceiling_answer(engine, variant, case) or ""
                tally(scores, case, shown, offset_at(case.document, case.line, case.character))
            rows.append((name, model.model_id, scores.summary()))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workspace", type=Path, nargs="?")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="fast", help="fast, standard or both")
    parser.add_argument(
        "--unseen", action="store_true", help="bench/unseen.py's positions instead of DIR's"
    )
    parser.add_argument("--repos", help="with --unseen: comma-separated names (default all)")
    parser.add_argument("--per-file", type=int, default=1, help="with --unseen")
    args = parser.parse_args()
    if args.unseen == (args.workspace is not None):
        parser.error("give a workspace DIR or --unseen, one of them")
    if args.unseen:
        from bench.unseen import all_positions, checkouts

        repos, by_repo = all_positions(args)
        roots = checkouts(repos)
        groups = {
            (f"{r.name} *" if r.unseen else r.name): [
                p.case(roots[r.name]) for p in by_repo[r.name]
            ]
            for r in repos
        }
        where = "the pinned repositories of bench/unseen.py (* kept unseen while tuning)"
    else:
        root = args.workspace.resolve()
        groups = {root.name: workspace_cases(root, args.n, args.seed, Exclusions(root))}
        where = str(root)
    engine = new_engine()
    count = sum(map(len, groups.values()))
    print(f"plain healed FIM prompt, {count} positions of {where}\n")
    print(
        "| positions | model | exact match % | edit similarity % | mid-word exact % (n) "
        "| between exact % (n) |"
    )
    print("|---|---|---|---|---|---|")
    for name, model_id, s in score_rows(engine, args.models.split(","), groups):
        if s is None:
            print(f"| {name} | {model_id} | (no FIM template) | | | |")
            continue
        print(
            f"| {name} ({s['cases']}) | {model_id} | {s['exact_match']} | {s['edit_similarity']} | "
            f"{s['mid_word_exact']} ({s['mid_word_cases']}) | "
            f"{s['between_tokens_exact']} ({s['between_tokens_cases']}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
