"""The completion pipeline shared by the server, `fastcomplete complete` and `fastcomplete eval`,
as plain functions: document + cursor -> a plan (`plan_completion`: context, the route of models,
the prompt's token ids, generation settings) -> engine -> post-processing and a syntax check
(`run_completion`). Every decision is made once, in the plan, and carried forward.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tree_sitter import Tree

from inference.engine import Engine, EngineResult, Tokens
from inference.generate import Finish, GenerationConfig
from inference.manifest import FimTemplate
from inference.router import Route, RoutingError, Task
from inference.scoring import ScoringCancelled
from lsp_server.context import WINDOW_STEP_LINES, AboveWindow, Snippet, build_context, window_start
from lsp_server.documents import insert_parsed
from lsp_server.positions import offset_at
from lsp_server.postprocess import (
    MINIMAL,
    NEXT_LINE,
    RULES,
    Processed,
    Rule,
    Site,
    postprocess_report,
)
from lsp_server.settings import Settings
from lsp_server.syntax import parser_for, tree_issues

BLOCK_OPENERS = (":", "{", "(", "[", "=>")
CHARS_PER_TOKEN = 3  # only when no tokenizer is loaded yet
SINGLE_LINE_DEADLINE_S = 1.5
MULTI_LINE_DEADLINE_S = 4.0
DRAFT_TOKENS = 8
# A prompt whose uncached part would take longer than the request's prefill budget is answered
# from the nearest lines instead (a short prompt that fits the budget); its window moves in
# steps this small, and it never gets fewer tokens than this.
SHORT_STEP_LINES = 8
SHORT_MIN_TOKENS = 48
# Candidates ranked by the code after the cursor: how many, and how much of that code is scored
# (the rest of the line and the next non-blank lines, up to a size that keeps scoring cheap).
SCORED_CANDIDATES = 3
SCORED_SUFFIX_LINES = 2
SCORED_SUFFIX_CHARS = 120
MAX_ALTERNATIVES = 3
# Post-processing steps worth counting when they shorten what is shown (stats: trimmed.<step>).
NOTABLE_TRIMS = frozenset(
    {"cut_off", "drop_degenerate_repetition", "drop_repeated_whitespace", "stop_at_repetition"}
)


@dataclass(frozen=True)
class PipelineOptions:
    """Switches for the eval's ablations; the server runs with everything on."""

    context: bool = True  # tree-sitter context builder; False: the raw prefix window only
    heal: bool = True
    postprocess: bool = True
    syntax_check: bool = True
    header: str = "comment"  # how the prompt names the file: "comment", "filename" or "none"
    suffix_scoring: bool = True  # rank candidates by how likely they make the code after them


@dataclass(frozen=True)
class CompletionPlan:
    prompt: str
    config: GenerationConfig
    site: Site
    offset: int
    route: Route | None = None  # which models serve, in order (None: plan made without an engine)
    tokens: Tokens | None = None  # `prompt` encoded by the first loaded model of the route
    # The whole-context plan when this one is the short plan of a cold prompt: to be prefilled
    # in the background after answering, so that the next keystroke gets the whole context.
    deferred: CompletionPlan | None = None
    rules: tuple[Rule, ...] = RULES  # post-processing (the eval's ablation may still pick MINIMAL)
    candidates: int = 1  # distinct items to answer with (an explicit request asks for more)
    # The code after the cursor that candidates are ranked by ("" : the first one is shown).
    score_suffix: str = ""


@dataclass
class Completion:
    text: str  # what the editor shows ("" for nothing)
    result: EngineResult | None
    syntax_rejected: bool = False  # a completion was dropped because it broke the syntax
    retried_on_standard: bool = False
    empty_reason: str | None = None  # why `text` is empty: "no_prompt", "model_empty",
    # "timed_out", "syntax", or "filtered.<rule>"
    alternatives: tuple[str, ...] = ()  # every item to show, best first (`text` among them)
    reranked: bool = False  # suffix scoring put another candidate before the first one
    trimmed_by: tuple[str, ...] = ()  # NOTABLE_TRIMS that shortened the text shown


def is_single_line(line_prefix: str, line_suffix: str, multiline: str) -> bool:
    """Mid-line: the rest of the line. After a block opener or on an empty line: a block."""
    if multiline == "never":
        return True
    if multiline == "always":
        return False
    if line_suffix.strip():
        return True
    stripped = line_prefix.rstrip()
    return not (not stripped or stripped.endswith(BLOCK_OPENERS))


def scoring_suffix(text: str, offset: int) -> str:
    """The code after the cursor that ranks candidates: the rest of the line and the next
    non-blank lines ("" when nothing but whitespace follows)."""
    rows = text[offset : offset + 4 * SCORED_SUFFIX_CHARS].split("\n")
    kept, non_blank = rows[:1], 0
    for row in rows[1:]:
        if non_blank >= SCORED_SUFFIX_LINES:
            break
        kept.append(row)
        non_blank += bool(row.strip())
    suffix = "\n".join(kept)[:SCORED_SUFFIX_CHARS]
    return suffix if suffix.strip() else ""


def plan_completion(
    text: str,
    line: int,
    character: int,
    settings: Settings,
    *,
    language_id: str = "",
    path: str = "",
    count_tokens: Callable[[str], int] | None = None,
    snippets: Sequence[Snippet] = (),
    fim: FimTemplate | None = None,
    options: PipelineOptions = PipelineOptions(),
    tree: Tree | None = None,
    above: AboveWindow | None = None,
    budget_tokens: int | None = None,
    step_lines: int = WINDOW_STEP_LINES,
    candidates: int = 1,
    repo: str = "",
) -> CompletionPlan:
    """Raises PositionError for a position outside the document. `tree`: `text` parsed.
    `budget_tokens`: the prompt's budget (default: the contextTokens setting). `candidates`:
    how many distinct items the answer may hold."""
    offset = offset_at(text, line, character)
    line_prefix = text[:offset].rsplit("\n", 1)[-1]
    line_suffix = text[offset:].split("\n", 1)[0].removesuffix("\r")
    count = count_tokens or (lambda s: len(s) // CHARS_PER_TOKEN)
    budget = settings.contextTokens if budget_tokens is None else budget_tokens
    if options.context:
        ctx = build_context(
            text,
            offset,
            language_id=language_id,
            path=path,
            budget_tokens=budget,
            count_tokens=count,
            snippets=snippets,
            fim=fim,
            header=options.header,
            tree=tree,
            above=above,
            step_lines=step_lines,
            repo=repo,
        )
        prompt, in_string = ctx.prompt, ctx.in_string_or_comment
    else:
        lines = text[:offset].split("\n")
        start = window_start(lines, len(lines) - 1, budget, count, step_lines)
        prompt, in_string = "\n".join(lines[start:]), False
    single = is_single_line(line_prefix, line_suffix, settings.multiline) or (
        in_string and settings.multiline == "auto"
    )
    inside_word = bool(line_prefix) and (line_prefix[-1].isalnum() or line_prefix[-1] == "_")
    after_space = line_prefix.endswith((" ", "\t")) and bool(line_prefix.strip())
    indented = bool(line_prefix) and not line_prefix.strip()
    config = GenerationConfig(
        max_new_tokens=settings.maxTokens,
        stop_at_newline=single,
        stop_strings=() if single else ("\n\n\n",),
        deadline_s=SINGLE_LINE_DEADLINE_S if single else MULTI_LINE_DEADLINE_S,
        draft_tokens=DRAFT_TOKENS,
        heal=options.heal and (inside_word or after_space or indented),
        stop_looping=True,
    )
    # A FIM prompt already holds the code after the cursor.
    ranked = options.suffix_scoring and fim is None and (candidates > 1 or settings.suffixScoring)
    return CompletionPlan(
        prompt,
        config,
        Site(line_prefix, line_suffix, single),
        offset,
        candidates=candidates,
        score_suffix=scoring_suffix(text, offset) if ranked else "",
    )


def plan_for_engine(
    engine: Engine | None,
    text: str,
    line: int,
    character: int,
    settings: Settings,
    *,
    language_id: str,
    path: str,
    snippets: Sequence[Snippet] = (),
    options: PipelineOptions = PipelineOptions(),
    tree: Tree | None = None,
    above: AboveWindow | None = None,
    prefill_budget_s: float | None = None,
    candidates: int = 1,
    repo: str = "",
) -> CompletionPlan:
    """The plan with its route decided and its prompt encoded once, by the model that serves
    first on that route (its tokenizer counts the budget; its FIM template shapes the prompt).

    `prefill_budget_s`: when the prompt's uncached part would take longer to prefill, the plan
    is a short one from the nearest lines that fits the budget, carrying the whole one as
    `deferred`."""
    route = engine.route(Task.COMPLETION, settings.fastMode) if engine else None
    model = engine.planning_model(route) if engine and route else None
    tokenizer = model.tokenizer if model else None
    # A remote in front takes the prompt as text, in its own FIM form when it has one.
    remote_fim = engine.remote_fim(route) if engine and route else None
    fim = remote_fim or (model.manifest.fim if model else None)

    def plan(**shape: object) -> CompletionPlan:
        made = plan_completion(
            text,
            line,
            character,
            settings,
            language_id=language_id,
            path=path,
            count_tokens=(lambda s: len(tokenizer.encode(s, bos=False))) if tokenizer else None,
            fim=fim,
            options=options,
            tree=tree,
            candidates=candidates,
            repo=repo,
            **shape,  # type: ignore[arg-type]
        )
        tokens = None
        if model is not None and made.prompt.strip():
            tokens = Tokens(model.tokenizer_id, tuple(model.tokenizer.encode(made.prompt)))
        return replace(made, route=route, tokens=tokens)

    whole = plan(snippets=snippets, above=above)
    if prefill_budget_s is None or engine is None or route is None or whole.tokens is None:
        return whole
    estimate_s = engine.prefill_estimate_s(route, whole.tokens)
    if estimate_s <= prefill_budget_s or model is None:
        return whole
    rate = engine.prefill_s_per_token(model.model_id)
    budget = max(SHORT_MIN_TOKENS, min(settings.contextTokens, int(prefill_budget_s / rate)))
    short = plan(budget_tokens=budget, step_lines=SHORT_STEP_LINES)
    if short.tokens is None or 2 * len(short.tokens.ids) > estimate_s / rate:
        return whole  # hardly shorter than what is left to prefill: not worth less context
    return replace(short, deferred=whole)


def next_line_plan(plan: CompletionPlan) -> CompletionPlan:
    """At the end of a line, the plan for the line after it: a suggestion that starts with the
    newline and the next line's indentation (shown after an accepted suggestion ends a line)."""
    if plan.site.line_suffix.strip() or not plan.config.stop_at_newline:
        return plan  # mid-line, or already a block
    config = replace(plan.config, next_line=True)
    site = replace(plan.site, single_line=False)
    return replace(plan, config=config, site=site, rules=NEXT_LINE)


def adds_syntax_errors(
    text: str, offset: int, insert: str, language_id: str, tree: Tree | None = None
) -> bool:
    """Whether inserting `insert` at `offset` adds syntax errors. With the document's `tree`,
    this is one incremental parse of the edited text; without, two full parses."""
    parser = parser_for(language_id)
    if parser is None:
        return False  # no grammar: nothing to check against
    if tree is None:
        tree = parser.parse(text.encode("utf-8"))
    after = insert_parsed(text, tree, offset, insert, language_id)[1]
    return after is not None and len(tree_issues(after)) > len(tree_issues(tree))


def run_completion(
    engine: Engine,
    plan: CompletionPlan,
    text: str,
    language_id: str,
    *,
    cancel: threading.Event,
    options: PipelineOptions = PipelineOptions(),
    tree: Tree | None = None,
) -> Completion:
    """Generate, post-process and check one completion (on a worker thread); with more
    candidates planned, also the alternatives, ranked by the code after the cursor."""
    started = time.perf_counter()
    first = _first_completion(engine, plan, text, language_id, cancel, options, tree)
    wanted = max(plan.candidates, SCORED_CANDIDATES if plan.score_suffix else 1)
    if wanted <= 1 or first.result is None or first.result.finish is Finish.CANCELLED:
        return replace(first, alternatives=(first.text,) if first.text else ())
    texts = [first.text] if first.text else []
    rules = plan.rules if options.postprocess else MINIMAL
    route = plan.route or engine.route(Task.COMPLETION)
    for rank in range(1, wanted):
        left = (plan.config.deadline_s or 0) - (time.perf_counter() - started)
        if left <= 0.05 or cancel.is_set():
            break
        config = replace(plan.config, first_choice=rank, deadline_s=left)
        try:
            other = engine.generate(
                Task.COMPLETION, plan.prompt, config, route=route, tokens=plan.tokens, cancel=cancel
            )
        except RoutingError:
            break
        shown = _processed(other, plan, rules).text
        if not shown or shown in texts:
            continue
        if options.syntax_check and adds_syntax_errors(text, plan.offset, shown, language_id, tree):
            continue
        texts.append(shown)
    ranked = texts
    if plan.score_suffix and len(texts) > 1 and not cancel.is_set():
        ranked = _rank_by_suffix(engine, plan, route, texts, cancel)
    if not ranked:
        return first
    kept = tuple(ranked[: plan.candidates])
    return replace(
        first, text=kept[0], alternatives=kept, reranked=kept[0] != first.text, empty_reason=None
    )


def _rank_by_suffix(
    engine: Engine, plan: CompletionPlan, route: Route, texts: list[str], cancel: threading.Event
) -> list[str]:
    """`texts` from the most to the least likely to be followed by the code after the cursor."""
    try:
        scores = engine.likelihoods(
            route, plan.prompt, plan.tokens, [t + plan.score_suffix for t in texts], cancel
        )
    except ScoringCancelled:
        return texts
    order = sorted(range(len(texts)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))
    return [texts[i] for i in order]


def _first_completion(
    engine: Engine,
    plan: CompletionPlan,
    text: str,
    language_id: str,
    cancel: threading.Event,
    options: PipelineOptions,
    tree: Tree | None,
) -> Completion:
    started = time.perf_counter()
    if not plan.prompt.strip():
        # nothing to continue from: not a question for a model
        return Completion("", None, empty_reason="no_prompt")
    rules = plan.rules if options.postprocess else MINIMAL
    route = plan.route or engine.route(Task.COMPLETION)
    result = engine.generate(
        Task.COMPLETION, plan.prompt, plan.config, route=route, tokens=plan.tokens, cancel=cancel
    )
    processed = _processed(result, plan, rules)
    shown, trimmed = processed.text, tuple(t for t in processed.trimmed_by if t in NOTABLE_TRIMS)
    if not shown:
        return Completion("", result, empty_reason=_why_empty(result, processed.dropped_by))
    if not options.syntax_check or not adds_syntax_errors(
        text, plan.offset, shown, language_id, tree
    ):
        return Completion(shown, result, trimmed_by=trimmed)
    # Broken syntax: one more try where the route says, while the time budget allows.
    retry = route.quality_retry(result.variant)
    left = (plan.config.deadline_s or 0) - (time.perf_counter() - started)
    rejected = Completion("", result, syntax_rejected=True, empty_reason="syntax")
    if retry is not None and left > 0.2 and not cancel.is_set():
        try:
            again = engine.generate(
                Task.COMPLETION,
                plan.prompt,
                replace(plan.config, deadline_s=left),
                route=retry,
                tokens=plan.tokens,
                cancel=cancel,
            )
        except RoutingError:  # the retry's model cannot serve now: nothing better to show
            return rejected
        shown = _processed(again, plan, rules).text
        if shown and not adds_syntax_errors(text, plan.offset, shown, language_id, tree):
            return Completion(shown, again, syntax_rejected=True, retried_on_standard=True)
    return rejected


def _processed(result: EngineResult, plan: CompletionPlan, rules: tuple[Rule, ...]) -> Processed:
    """Post-processed text; one cut by the token limit is first trimmed to a sound point."""
    cut_off = result.finish is Finish.LENGTH
    return postprocess_report(result.text, plan.site, rules, cut_off=cut_off)


def _why_empty(result: EngineResult, dropped_by: str | None) -> str:
    if dropped_by is not None:
        return f"filtered.{dropped_by}"
    if result.finish is Finish.DEADLINE:
        return "timed_out"
    if result.finish is Finish.CANCELLED:
        return "cancelled"
    return "model_empty"
