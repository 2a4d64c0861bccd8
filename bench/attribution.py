"""Every point between the product and the model's own ceiling, position by position (issue 49,
item 3): on bench/unseen.py's held-out positions, in-process (no LSP server), the product's
answer beside the plain healed FIM prompt's, and the product again with one part off (or the
ceiling's suffix added) at a time, so that each miss and each gain is put down to the parts
whose removal or addition flips it.

    .venv/bin/python bench/unseen_repos.py                       # once: materialise the pins
    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python bench/attribution.py
        [--repos a,b] [--n 20] [--seed 0] [--per-file 1] [--limit K]
        [--asks /tmp/ba/asks_base.json] [--settings JSON] [--ablations 'no healing,...']
        [--ms-per-token 1.6] [--cold-prefill-ms 250] [--suffix-tokens 300] [--json PATH] [--list]

    # a smoke run: the first 2 of the 20 positions of one tuned repository
    ... bench/attribution.py --repos openai-agents-python --limit 2 --json /tmp/attribution.json

Positions are exactly bench/unseen.py's (`all_positions`: the same repositories, `--n`, `--seed`,
`--per-file`; with `--asks FILE`, that run's n, seed, per-file and repositories, and its answers
are put beside; `--limit K` keeps the first K of each repository's, the index still without all
n files). **github-mcp-server (Go) is kept UNSEEN while tuning** (marked `*`): report it,
decide nothing by it. Per repository the workspace is bench/unseen_repos.held_out_copy, the
repository without the files the positions are cut from (as `bench/unseen.py asks` roots the
server), indexed once (lsp_server.workspace.index.WorkspaceIndex, its exclusions) before the
first position: the cut line cannot reach a prompt through the index. Each position is a file
just opened: a new Planner (lsp_server.cli.evaluation.eval_planner) per variant, nothing chosen
for it before. One engine as the server makes it (no completion cache, no KV store on disk,
completions never load a model: a syntax retry on the standard model is refused, as on a server
in fast mode), the fast (8-bit) variant; settings the server's defaults (`--settings` over them).

Variants (columns of the first table, keys of `answers` in the JSON):
- `ceiling`: bench/fim_ceiling.py's plain healed FIM prompt: the last 1,200 tokens before the
  cursor, 300 after, the file only, greedy to the end of the line, minimal clean-up.
- `product, warm`: the server's pipeline (Planner.plan, then Planner.run: context builder with the
  index's snippets and definitions, names, healing, post-processing and the syntax check) with
  the whole prompt prefilled first, as `fastcomplete eval` scores a case: what the product
  answers when nothing is cold.
- `product, cold`: the same with coldContext on, the KV cache emptied and `--cold-prefill-ms` of
  prefill allowed (the server's default 250 ms): where the whole prompt is too long to prefill in
  that time, the short prompt from the nearest lines answers (`short` in the JSON), as a cold
  ask gets it (the server would then wait for the whole prompt only if the short one gave
  nothing: here the short one's answer stands).
- `warm, with deadline (timed)`: the warm product with the product's deadlines (1.5 s a line,
  4 s a block) on this machine: the only timed column (noise: others' work on the cores). Every
  other product variant runs with the deadlines lifted (600 s), so that its answer is the
  pipeline's, not the machine's.
- ablations of the warm product, one part at a time (warm each):
  `no workspace` (no workspace folder: single-file prompts, no index, no names from it),
  `no index snippets`, `no definitions` (PipelineOptions), `raw prefix` (no context builder: the
  raw window before the cursor, no FIM form), `no healing`, `no post-processing` (no rules, no
  syntax check), `no syntax check`, `one line` (multiline "never": stop at the line's end instead
  of a block where the server asks one), `no names` (knownNames off), `no suffix scoring`
  (suffixScoring off: already off by default and moot with a FIM prompt, so this column equals
  the warm one by construction), `+ suffix N` (the product's prompt with whole lines after the
  cursor up to `--suffix-tokens` tokens, as the ceiling has them, instead of the CPU rule's rest
  of the line: lsp_server.prompting.context's `_suffix_part` patched). Two bridges split what
  no single part explains: `ceiling's prompt` (the product's run, names, healing rule, stop rules
  and post-processing, on the ceiling's token ids: a flip is the product's prompt's doing, put
  down to the context builder) and `ceiling's run` (the product's prompt generated and cleaned as
  the ceiling does: greedy, always healed, no names, the line's end, minimal rules, no syntax
  check: a flip is the product's run's doing, put down to stop rules and post-processing).
  An ablation whose plan (token ids, generation settings, site, rules) is the warm product's is
  not run again: its answer is the warm one (`same_plan_as` in the JSON).
The prefill rate the planner plans by is pinned at `--ms-per-token` (1.6: what two cores
measure for Qwen 0.5B's fast model, docs/cpu-code-model.md), so the cold prompt's length and the
FIM suffix budget (the rest of the line only, at that rate) do not depend on this machine's
load. `asked (server)`: with `--asks`, the answer that run's server gave after the rest.

Scoring: the answer's first line, stripped, equals the expected rest of the line, stripped
(bench/unseen.py `scored`); an empty answer is a miss. `raw` in the JSON is the engine's own
text (`done.result.text`, before stop rules and post-processing) scored the same way.

Attribution (the second table; lost / gained positions per part, per group):
- `ceiling only / product only`: positions the ceiling gets and the warm product misses, and the
  other way round; their difference is the gap in positions (one position = 100/n points).
- a ceiling-only position is *lost* to every part whose ablation (removal, or addition for the
  suffix) makes the warm product right; a product-only one is *gained* by every part whose
  ablation makes it wrong. A position may go to several parts (several ablations flip it), so
  the parts' counts may add up to more than the gap; one no ablation flips is `unexplained` (the
  prompt's other differences: its length, the repository format, the window's start).
  Parts: context builder (no workspace, no index snippets, no definitions, raw prefix, ceiling's
  prompt), healing, stop rules and post-processing (no post-processing, no syntax check, one
  line, ceiling's run), names, suffix (no suffix scoring, + suffix N).
- `cold prompt`: lost where the ceiling and the warm product are right and the cold product is
  wrong; gained where the ceiling and the warm product are wrong and the cold one right.
- `deadline (timed)`: lost where the warm product is right and the timed one wrong.
- `raw right, shown wrong`: the warm product's raw model text was right and the stop rules or
  post-processing changed it (/ the other way round: raw wrong, shown right).
- with `--asks`, `asked: answer differs from in-process`: positions whose served answer is
  neither the in-process warm nor the cold one (timing: the deadline, interruptions, the show
  gate); and `asked cold` counts that run's cold answers.
`--list` prints the gap's positions with the ceiling's, the product's and the server's answers.
The third table counts, per ablation and over every position (not only the gap's), the positions
it turns wrong -> right / right -> wrong against the warm product: what each part is worth.

Written to bench/results/attribution.json (`--json`): the settings, and per position its place,
the expected text, each variant's answer (`text` shown, `answer` its first line stripped,
`exact`, `similarity`, `raw`, `raw_exact`, `finish`, `prompt_tokens`, `empty_reason`,
`same_plan_as`, and `short` for the cold one), its attribution and, with `--asks`, the served one.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import contextlib
import dataclasses
import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.unseen import RESULTS, Position, all_positions, checkouts, first_line, scored
from bench.unseen_repos import UnseenRepo, held_out_copy
from lsp_server.cli.evaluation import LoadedWorkspace, eval_planner, opened
from lsp_server.completion.plan import CompletionPlan, PipelineOptions
from lsp_server.config.settings import Settings
from lsp_server.workspace.exclusions import Exclusions

CEILING = "ceiling"
WARM = "product, warm"
COLD = "product, cold"
TIMED = "warm, with deadline (timed)"
ASKED = "asked (server)"

# The parts a miss or a gain is put down to.
COLD_PROMPT = "cold prompt"
CONTEXT = "context builder"
HEALING = "healing"
POST = "stop rules and post-processing"
NAMES = "names"
SUFFIX = "suffix"
DEADLINE = "deadline (timed)"
UNEXPLAINED = "unexplained"
PARTS = (COLD_PROMPT, CONTEXT, HEALING, POST, NAMES, SUFFIX, DEADLINE, UNEXPLAINED)

CEILING_PROMPT = "ceiling's prompt"  # the product's run on the ceiling's token ids
CEILING_RUN = "ceiling's run"  # the product's prompt, generated and cleaned as the ceiling does

NO_DEADLINE_S = 600.0  # "lifted": long enough for any answer, and a syntax retry still has time
MS_PER_TOKEN = 1.6  # Qwen 0.5B's fast model on two cores (docs/cpu-code-model.md: 1.5-1.7)
SUFFIX_TOKENS = 300  # the ceiling's (bench/fim_ceiling.py AFTER_TOKENS)


@dataclass(frozen=True)
class Ablation:
    """The warm product with one part off (or the ceiling's suffix added)."""

    name: str
    part: str  # what a flip is put down to
    options: PipelineOptions = PipelineOptions()
    settings: tuple[tuple[str, Any], ...] = ()  # Settings fields over the product's
    workspace: bool = True  # False: no workspace folder (single-file prompts)
    suffix_tokens: int = 0  # > 0: whole lines after the cursor up to this many tokens
    swap: str = ""  # "prompt": the ceiling's token ids; "run": the ceiling's generation and rules


def ablations(suffix_tokens: int = SUFFIX_TOKENS) -> tuple[Ablation, ...]:
    return (
        Ablation("no workspace", CONTEXT, workspace=False),
        Ablation("no index snippets", CONTEXT, PipelineOptions(index_snippets=False)),
        Ablation("no definitions", CONTEXT, PipelineOptions(definitions=False)),
        Ablation("raw prefix", CONTEXT, PipelineOptions(context=False)),
        Ablation("no healing", HEALING, PipelineOptions(heal=False)),
        Ablation(
            "no post-processing", POST, PipelineOptions(postprocess=False, syntax_check=False)
        ),
        Ablation("no syntax check", POST, PipelineOptions(syntax_check=False)),
        Ablation("one line", POST, settings=(("multiline", "never"),)),
        Ablation("no names", NAMES, PipelineOptions(names=False), (("knownNames", False),)),
        Ablation(
            "no suffix scoring",
            SUFFIX,
            PipelineOptions(suffix_scoring=False),
            (("suffixScoring", False),),
        ),
        Ablation(f"+ suffix {suffix_tokens}", SUFFIX, suffix_tokens=suffix_tokens),
        Ablation(CEILING_PROMPT, CONTEXT, swap="prompt"),
        Ablation(CEILING_RUN, POST, PipelineOptions(syntax_check=False), swap="run"),
    )


# -- attribution (pure) ------------------------------------------------------------------------


def outcome(ceiling: bool, product: bool) -> str:
    if ceiling and product:
        return "both"
    if ceiling:
        return "ceiling only"
    return "product only" if product else "neither"


def attribute(exact: Mapping[str, bool], parts: Mapping[str, str]) -> dict[str, Any]:
    """One position's attribution. `exact`: variant -> right, for CEILING and WARM, and where run
    COLD, TIMED and the ablations; `parts`: ablation -> the part its flips are put down to.

    A ceiling-only position is lost to the parts of the ablations that make the warm product
    right; a product-only one gained by the parts of those that make it wrong; UNEXPLAINED when
    none does. `cold`: "lost" where the ceiling and the warm product are right and the cold one
    wrong, "gained" where both are wrong and the cold one right. `deadline`: the timed warm
    product against the untimed one."""
    ceiling, warm = exact[CEILING], exact[WARM]
    flips = [name for name in parts if name in exact and exact[name] != warm]
    found = [p for p in PARTS if any(parts[n] == p for n in flips)]
    out: dict[str, Any] = {
        "outcome": outcome(ceiling, warm),
        "flips": flips,
        "lost": [],
        "gained": [],
        "cold": None,
        "deadline": None,
    }
    if ceiling and not warm:
        out["lost"] = found or [UNEXPLAINED]
    elif warm and not ceiling:
        out["gained"] = found or [UNEXPLAINED]
    if COLD in exact:
        if ceiling and warm and not exact[COLD]:
            out["cold"] = "lost"
        elif not ceiling and not warm and exact[COLD]:
            out["cold"] = "gained"
    if TIMED in exact and exact[TIMED] != warm:
        out["deadline"] = "lost" if warm else "gained"
    return out


def ledger(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts over positions (rows as the JSON holds them: `answers` and `attribution`, `asked`
    where an asks file was given): [lost, gained] per part, the gap, and the post-processing
    and server counts."""
    parts = {p: [0, 0] for p in PARTS}
    out: dict[str, Any] = {"positions": len(rows), "ceiling_only": 0, "product_only": 0}
    raw_right_shown_wrong = raw_wrong_shown_right = 0
    asked = asked_cold = asked_differs = 0
    for row in rows:
        att, warm = row["attribution"], row["answers"][WARM]
        out["ceiling_only"] += att["outcome"] == "ceiling only"
        out["product_only"] += att["outcome"] == "product only"
        for part in att["lost"]:
            parts[part][0] += 1
        for part in att["gained"]:
            parts[part][1] += 1
        for key, part in (("cold", COLD_PROMPT), ("deadline", DEADLINE)):
            if att.get(key):
                parts[part][att[key] == "gained"] += 1
        raw_right_shown_wrong += bool(warm.get("raw_exact")) and not warm["exact"]
        raw_wrong_shown_right += warm["exact"] and not warm.get("raw_exact")
        if (served := row.get("asked")) is not None:
            asked += 1
            asked_cold += bool(served["cold"])
            asked_differs += served_differs(row)
    out["parts"] = parts
    out["raw_right_shown_wrong"] = raw_right_shown_wrong
    out["raw_wrong_shown_right"] = raw_wrong_shown_right
    if asked:
        out.update(asked=asked, asked_cold=asked_cold, asked_differs=asked_differs)
    return out


def served_differs(row: Mapping[str, Any]) -> bool:
    """The served answer is neither the in-process warm nor the cold one (first lines, stripped)."""
    served = row["asked"]["answer"]
    made = {row["answers"][v]["answer"] for v in (WARM, COLD) if v in row["answers"]}
    return first_line(served).strip() not in made


def flip_counts(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, list[int]]:
    """Per variant, over all `rows`: [wrong -> right, right -> wrong] against the warm product."""
    out = {}
    for name in names:
        pairs = [
            (r["answers"][WARM]["exact"], r["answers"][name]["exact"])
            for r in rows
            if name in r["answers"]
        ]
        out[name] = [sum(b and not a for a, b in pairs), sum(a and not b for a, b in pairs)]
    return out


def groups_of(rows: Sequence[Mapping[str, Any]], repos: Sequence[UnseenRepo]) -> dict[str, list]:
    """Per repository ('*': kept unseen), the ones tuned on, and all (as bench/unseen.py)."""
    out = {
        (f"{r.name} *" if r.unseen else r.name): [x for x in rows if x["repo"] == r.name]
        for r in repos
    }
    tuned = [x for x in rows if not x["unseen"]]
    if len(repos) > 1 and 0 < len(tuned) < len(rows):
        out["tuned on (not *)"] = tuned
    if len(repos) > 1:
        out["all"] = list(rows)
    return out


def exact_pct(rows: Sequence[Mapping[str, Any]], variant: str) -> str:
    have = [r["answers"][variant]["exact"] for r in rows if variant in r["answers"]]
    return f"{100 * sum(have) / len(have):.1f}" if have else "-"


# -- answers -----------------------------------------------------------------------------------


@contextlib.contextmanager
def patched(module: Any, **values: Any) -> Iterator[None]:
    """`module`'s globals set to `values` for the block (the bench's knobs the product lacks)."""
    old = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(module, name, value)


def whole_lines_suffix(tokens: int) -> Callable[[str, int | None, int, Callable], str]:
    """A stand-in for lsp_server.prompting.context._suffix_part: the rest of the cursor's line,
    then whole lines while they fit `tokens`, whatever the CPU rule and the budget say."""
    from lsp_server.prompting.context import fim_suffix

    def suffix_part(after: str, _tokens: int | None, _budget: int, count: Callable) -> str:
        return fim_suffix(after, tokens, count)

    return suffix_part


def lifted_deadlines() -> contextlib.AbstractContextManager[None]:
    from lsp_server.completion import plan

    return patched(plan, SINGLE_LINE_DEADLINE_S=NO_DEADLINE_S, MULTI_LINE_DEADLINE_S=NO_DEADLINE_S)


def fingerprint(plan: CompletionPlan, options: PipelineOptions) -> str:
    """What decides a run's answer (greedy, deadlines lifted): equal ones answer alike."""
    ids = tuple(plan.tokens.ids) if plan.tokens is not None else plan.prompt
    rules = tuple(getattr(r, "__name__", repr(r)) for r in plan.rules)
    return repr(
        (
            ids,
            plan.config.cache_key,
            plan.config.heal,
            plan.config.deadline_s,
            plan.site,
            rules,
            plan.score_suffix,
            plan.candidates,
            options.postprocess,
            options.syntax_check,
        )
    )


def with_ceiling_prompt(plan: CompletionPlan, case: Any) -> CompletionPlan:
    """`plan` on bench/fim_ceiling.py's token ids (its prompt, built as `ceiling_answer` builds
    it: the last BEFORE_TOKENS before the cursor, AFTER_TOKENS after, the file only)."""
    from bench.fim_ceiling import AFTER_TOKENS, BEFORE_TOKENS
    from inference.serving import Tokens
    from lsp_server.prompting.context import plain_text
    from lsp_server.text.positions import offset_at

    model = plan.serving.model if plan.serving is not None else None
    fim = model.manifest.fim if model is not None else None
    if model is None or fim is None:
        return plan
    tok = model.tokenizer
    offset = offset_at(case.document, case.line, case.character)
    before = tok.encode(plain_text(case.document[:offset], fim), bos=False)[-BEFORE_TOKENS:]
    after = tok.encode(plain_text(case.document[offset:], fim), bos=False)[:AFTER_TOKENS]
    ids = [tok.special_id(fim.prefix), *before, tok.special_id(fim.suffix), *after]
    ids.append(tok.special_id(fim.middle))
    return dataclasses.replace(plan, tokens=Tokens(model.tokenizer_id, tuple(ids)))


def with_ceiling_run(plan: CompletionPlan) -> CompletionPlan:
    """`plan`'s prompt generated and cleaned as bench/fim_ceiling.py does: greedy, healed, to the
    end of the line (48 tokens at most), the minimal rules (and, with PipelineOptions'
    syntax_check off, no syntax check)."""
    from inference.generate import GenerationConfig
    from lsp_server.completion.postprocess import MINIMAL

    config = GenerationConfig(max_new_tokens=48, stop_at_newline=True, heal=True)
    site = dataclasses.replace(plan.site, single_line=True)
    return dataclasses.replace(plan, config=config, site=site, rules=MINIMAL)


def new_engine(ms_per_token: float) -> Any:
    """The server's engine, minus what would make one position help another: no completion
    cache, no KV store on disk; completions never load a model (as the server's); the prefill
    rate pinned (the planner's cold-prompt and suffix rules read it)."""
    from inference.engine import Engine, EngineConfig
    from inference.router import FAST
    from models.choice import selected_model

    engine = Engine(
        EngineConfig(
            model_name=selected_model(),
            cache_dir=None,
            cache_memory_items=0,
            kv_store_dir=None,
            completions_load_models=False,
        )
    )
    model = engine.load(FAST)
    if model.manifest.fim is None:
        raise SystemExit(f"{model.model_id}: no FIM template, no ceiling to compare with")
    model.runner.prefill_s_per_token = ms_per_token / 1000
    model.runner.measure_prefill = lambda *_: None  # type: ignore[method-assign]
    return engine


def clear_kv(engine: Any) -> None:
    from inference.router import FAST, STANDARD

    for variant in (FAST, STANDARD):
        if (model := engine.router.loaded(variant)) is not None:
            model.pool.clear()


@dataclass
class Runner:
    """Answers at one position: the ceiling, the product warm, cold, timed and its ablations."""

    engine: Any
    settings: Settings
    workspace: LoadedWorkspace
    single: LoadedWorkspace  # no workspace folder
    cold_prefill_ms: int

    def product(
        self,
        name: str,
        case: Any,
        seen: dict[str, tuple[str, dict[str, Any]]],
        *,
        settings: Settings | None = None,
        options: PipelineOptions = PipelineOptions(),
        workspace: LoadedWorkspace | None = None,
        cold: bool = False,
        swap: str = "",
    ) -> dict[str, Any]:
        """One variant's answer; an earlier variant's when the plan is the same (`seen`:
        fingerprint -> (variant, entry)). `swap`: see Ablation."""
        planner = eval_planner(
            self.engine, settings or self.settings, workspace or self.workspace, options
        )
        snap, view = opened(planner, case)
        if cold:
            clear_kv(self.engine)
        plan = planner.plan(snap, view, cold_ok=cold)
        if swap == "prompt":
            plan = with_ceiling_prompt(plan, case)
        elif swap == "run":
            plan = with_ceiling_run(plan)
        key = fingerprint(plan, options)
        if key in seen:
            first, entry = seen[key]
            return {**entry, "same_plan_as": first}
        if not cold and plan.serving is not None and plan.prompt.strip():
            self.engine.warm(
                plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal
            )
        done = planner.run(plan, snap, view, threading.Event())
        entry = answer_entry(done.text, case.expected)
        result = done.result
        entry.update(
            raw=result.text if result is not None else None,
            raw_exact=scored(result.text, case.expected)[0] if result is not None else False,
            finish=result.finish.value if result is not None else None,
            prompt_tokens=len(plan.tokens.ids) if plan.tokens is not None else None,
            empty_reason=done.empty_reason,
            same_plan_as=None,
        )
        if cold:
            entry["short"] = plan.deferred is not None
        seen[key] = (name, entry)
        return entry

    def answers(
        self, case: Any, chosen: Sequence[Ablation], timed: bool = True
    ) -> dict[str, dict[str, Any]]:
        from bench.fim_ceiling import ceiling_answer
        from inference.router import FAST
        from lsp_server.prompting import context

        out: dict[str, dict[str, Any]] = {}
        out[CEILING] = answer_entry(ceiling_answer(self.engine, FAST, case) or "", case.expected)
        seen: dict[str, tuple[str, dict[str, Any]]] = {}
        with lifted_deadlines():
            out[WARM] = self.product(WARM, case, seen)
            for ab in chosen:
                settings = dataclasses.replace(self.settings, **dict(ab.settings))
                workspace = self.workspace if ab.workspace else self.single
                suffix = (
                    patched(context, _suffix_part=whole_lines_suffix(ab.suffix_tokens))
                    if ab.suffix_tokens
                    else contextlib.nullcontext()
                )
                with suffix:
                    out[ab.name] = self.product(
                        ab.name,
                        case,
                        seen,
                        settings=settings,
                        options=ab.options,
                        workspace=workspace,
                        swap=ab.swap,
                    )
        if timed:
            out[TIMED] = self.product(TIMED, case, seen)
        with lifted_deadlines():
            cold = dataclasses.replace(
                self.settings, coldContext=True, coldPrefillMs=self.cold_prefill_ms
            )
            out[COLD] = self.product(COLD, case, seen, settings=cold, cold=True)
        return out


def answer_entry(text: str, expected: str) -> dict[str, Any]:
    exact, similarity = scored(text, expected)
    return {
        "text": text,
        "answer": first_line(text).strip(),
        "exact": exact,
        "similarity": round(similarity, 3),
    }


def run_repo(
    engine: Any,
    repo: UnseenRepo,
    root: Path,
    positions: Sequence[Position],
    held_out: set[str],
    settings: Settings,
    chosen: Sequence[Ablation],
    cold_prefill_ms: int,
    asked: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """`positions` of `repo`, the workspace a copy of it without the `held_out` files (every
    position's of the run, as `bench/unseen.py asks` roots its server), indexed once."""
    from lsp_server.workspace.index import WorkspaceIndex

    workspace = held_out_copy(root, held_out)
    try:
        started = time.perf_counter()
        exclusions = Exclusions(workspace)
        index = WorkspaceIndex(workspace, None, exclusions=exclusions)
        report = index.build()
        print(
            f"{repo.name}: indexed {report.files} files in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
        runner = Runner(
            engine,
            settings,
            LoadedWorkspace(index, exclusions),
            LoadedWorkspace(None, Exclusions(None)),
            cold_prefill_ms,
        )
        parts = {ab.name: ab.part for ab in chosen}
        rows = []
        for i, pos in enumerate(positions, 1):
            started = time.perf_counter()
            answers = runner.answers(pos.case(workspace), chosen)
            row: dict[str, Any] = {**pos.brief(), "answers": answers}
            row["attribution"] = attribute({k: v["exact"] for k, v in answers.items()}, parts)
            if (ask := asked.get(pos.key)) is not None:
                if ask["expected"] != pos.expected:
                    raise SystemExit(f"{pos.key}: the asks file was cut differently")
                row["asked"] = {k: ask[k] for k in ("answer", "exact", "cold", "empty_reason")}
                row["answers"][ASKED] = answer_entry(ask["answer"], pos.expected)
            rows.append(row)
            marks = " ".join(
                f"{v}={'Y' if answers[v]['exact'] else 'n'}" for v in (CEILING, WARM, COLD)
            )
            print(
                f"  {i}/{len(positions)} {pos.key}  {marks}  "
                f"({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
            )
        return rows
    finally:
        shutil.rmtree(workspace.parent, ignore_errors=True)


# -- report ------------------------------------------------------------------------------------


def print_report(rows: list[dict[str, Any]], repos: Sequence[UnseenRepo], names: list[str]) -> None:
    groups = groups_of(rows, repos)
    labels = list(groups)
    width = max(14, *(len(x) + 1 for x in labels))
    first = 44

    def head(title: str) -> None:
        print(f"\n{title:<{first}}" + "".join(f"{x:>{width}}" for x in labels))

    head("exact % (positions)")
    print(f"{'positions':<{first}}" + "".join(f"{len(g):>{width}}" for g in groups.values()))
    variants = [CEILING, WARM, COLD, ASKED, TIMED, *names]
    for variant in variants:
        if not any(variant in r["answers"] for r in rows):
            continue
        label = variant if variant in (CEILING, WARM, COLD, ASKED, TIMED) else f"  - {variant}"
        print(
            f"{label:<{first}}"
            + "".join(f"{exact_pct(g, variant):>{width}}" for g in groups.values())
        )
    shorts = [sum(bool(r["answers"][COLD].get("short")) for r in g) for g in groups.values()]
    print(
        f"{'  (cold: short prompt answered)':<{first}}" + "".join(f"{s:>{width}}" for s in shorts)
    )

    ledgers = {k: ledger(g) for k, g in groups.items()}
    head("against the ceiling: positions lost/gained")
    cells = [f"{x['ceiling_only']}/{x['product_only']}" for x in ledgers.values()]
    print(
        f"{'ceiling only / product only (warm)':<{first}}" + "".join(f"{c:>{width}}" for c in cells)
    )
    for part in PARTS:
        cells = [f"{x['parts'][part][0]}/{x['parts'][part][1]}" for x in ledgers.values()]
        print(f"{part:<{first}}" + "".join(f"{c:>{width}}" for c in cells))
    cells = [f"{x['raw_right_shown_wrong']}/{x['raw_wrong_shown_right']}" for x in ledgers.values()]
    print(
        f"{'raw right, shown wrong / the reverse':<{first}}"
        + "".join(f"{c:>{width}}" for c in cells)
    )
    if any("asked" in x for x in ledgers.values()):
        for key, label in (
            ("asked_cold", "asked cold"),
            ("asked_differs", "asked: differs from in-process"),
        ):
            cells = [str(x.get(key, "-")) for x in ledgers.values()]
            print(f"{label:<{first}}" + "".join(f"{c:>{width}}" for c in cells))

    head("ablations vs warm, all positions: w->r/r->w")
    for name in [TIMED, *names]:
        if not any(name in r["answers"] for r in rows):
            continue
        cells = [f"{a}/{b}" for a, b in (flip_counts(g, [name])[name] for g in groups.values())]
        print(f"{name:<{first}}" + "".join(f"{c:>{width}}" for c in cells))
    print(
        "\n* kept unseen while tuning. lost/gained: ceiling-only positions a part's ablation makes "
        "right / product-only ones it makes wrong (a position may go to several parts); cold "
        "prompt: ceiling and warm right, cold wrong / the reverse; w->r/r->w: positions the "
        "ablation turns wrong->right / right->wrong against the warm product"
    )


def print_gap(rows: Sequence[Mapping[str, Any]]) -> None:
    """The positions between the product and the ceiling: what each answered, and why."""
    print("\nthe gap's positions (ceiling only: lost to; product only: gained by)\n")
    for r in rows:
        att, answers = r["attribution"], r["answers"]
        if att["outcome"] not in ("ceiling only", "product only"):
            continue
        why = att["lost"] or att["gained"]
        mark = " *" if r["unseen"] else ""
        print(f"{r['key']}{mark}  {att['outcome']}: {', '.join(why)}")
        print(f"    {r['before_cursor'].strip()!r} -> {r['expected'].strip()!r}")
        for v in (CEILING, WARM, COLD, ASKED):
            if v in answers:
                print(f"    {v:<16} {answers[v]['answer']!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repos", help="comma-separated names (default: all three)")
    parser.add_argument("--n", type=int, default=20, help="positions per repository")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-file", type=int, default=1)
    parser.add_argument("--limit", type=int, help="only the first K positions per repository")
    parser.add_argument("--asks", type=Path, help="a `bench/unseen.py asks` JSON: its positions")
    parser.add_argument("--settings", help="the product's settings over the defaults, as JSON")
    parser.add_argument("--ablations", help="comma-separated ablation names (default: all)")
    parser.add_argument("--ms-per-token", type=float, default=MS_PER_TOKEN)
    parser.add_argument("--cold-prefill-ms", type=int, default=Settings().coldPrefillMs)
    parser.add_argument("--suffix-tokens", type=int, default=SUFFIX_TOKENS)
    parser.add_argument("--json", type=Path, help="default bench/results/attribution.json")
    parser.add_argument(
        "--list", action="store_true", help="also print the gap's positions and their answers"
    )
    args = parser.parse_args()

    asked: dict[str, dict[str, Any]] = {}
    if args.asks:
        product = json.loads(args.asks.read_text())
        args.n, args.seed, args.per_file = product["n"], product["seed"], product["per_file"]
        names = [r["repo"] for r in product["repos"]]
        if args.repos:
            names = [n for n in names if n in {x.strip() for x in args.repos.split(",")}]
        args.repos = ",".join(names)
        asked = {a["key"]: a for r in product["repos"] for a in r["asks"]}
    every = ablations(args.suffix_tokens)
    chosen = list(every)
    if args.ablations:
        wanted = [x.strip() for x in args.ablations.split(",") if x.strip()]
        known = {ab.name: ab for ab in every}
        if unknown := [w for w in wanted if w not in known]:
            parser.error(f"unknown ablations {unknown}: choose from {list(known)}")
        chosen = [known[w] for w in wanted]
    overrides = json.loads(args.settings) if args.settings else {}
    settings = dataclasses.replace(Settings(), **overrides)

    repos, by_repo = all_positions(args)
    roots = checkouts(repos)
    engine = new_engine(args.ms_per_token)
    rows: list[dict[str, Any]] = []
    for repo in repos:
        every_one = by_repo[repo.name]
        rows += run_repo(
            engine,
            repo,
            roots[repo.name],
            every_one[: args.limit],
            {p.path for p in every_one},  # all of the run's files, whatever --limit keeps
            settings,
            chosen,
            args.cold_prefill_ms,
            asked,
        )
    names = [ab.name for ab in chosen]
    print_report(rows, repos, names)
    if args.list:
        print_gap(rows)
    payload = {
        "model": os.environ.get("FASTCOMPLETE_MODEL") or "(default)",
        "n": args.n,
        "seed": args.seed,
        "per_file": args.per_file,
        "limit": args.limit,
        "asks": str(args.asks) if args.asks else None,
        "settings": overrides,
        "ms_per_token": args.ms_per_token,
        "cold_prefill_ms": args.cold_prefill_ms,
        "suffix_tokens": args.suffix_tokens,
        "ablations": {ab.name: ab.part for ab in chosen},
        "summary": {k: ledger(g) for k, g in groups_of(rows, repos).items()},
        "positions": rows,
    }
    path = args.json or RESULTS / "attribution.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
