"""A completion's run: its plan (lsp_server.completion.plan) -> engine -> post-processing and a
syntax check, with alternatives ranked by the code after the cursor when asked for. `complete_at`
is the whole pipeline, the one the server, `fastcomplete eval` and `fastcomplete complete` share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from tree_sitter import Tree

from inference.engine import Engine, EngineResult
from inference.generate import Finish
from inference.router import RoutingError, Task
from inference.scoring import ScoringCancelled
from inference.serving import ServingPlan
from lsp_server.completion.plan import CompletionPlan, Cursor, PipelineOptions, Request, plan_at
from lsp_server.completion.postprocess import MINIMAL, Processed, Rule, postprocess_report
from lsp_server.config.settings import Settings
from lsp_server.config.tuning import SCORED_CANDIDATE_ITEMS
from lsp_server.text.documents import insert_parsed
from lsp_server.text.syntax import parser_for, tree_issues

# Post-processing steps worth counting when they shorten what is shown (stats: trimmed.<step>).
NOTABLE_TRIMS = frozenset(
    {"cut_off", "drop_degenerate_repetition", "drop_repeated_whitespace", "stop_at_repetition"}
)


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
    on_text: Callable[[str], None] | None = None,
) -> Completion:
    """Generate, post-process and check one completion (on a worker thread); with more
    candidates planned, also the alternatives, ranked by the code after the cursor.
    `on_text`: the first completion's raw text so far, as the model writes it."""
    started = time.perf_counter()
    first = _first_completion(engine, plan, text, language_id, cancel, options, tree, on_text)
    wanted = max(plan.candidates, SCORED_CANDIDATE_ITEMS if plan.score_suffix else 1)
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
    if plan.score_suffix and len(texts) > 1 and plan.serving and not cancel.is_set():
        ranked = _rank_by_suffix(engine, plan, plan.serving, texts, cancel)
    if not ranked:
        return first
    kept = tuple(ranked[: plan.candidates])
    return replace(
        first, text=kept[0], alternatives=kept, reranked=kept[0] != first.text, empty_reason=None
    )


def _rank_by_suffix(
    engine: Engine,
    plan: CompletionPlan,
    serving: ServingPlan,
    texts: list[str],
    cancel: threading.Event,
) -> list[str]:
    """`texts` from the most to the least likely to be followed by the code after the cursor."""
    try:
        scores = engine.likelihoods(
            serving, plan.prompt, plan.tokens, [t + plan.score_suffix for t in texts], cancel
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
    on_text: Callable[[str], None] | None = None,
) -> Completion:
    started = time.perf_counter()
    if not plan.prompt.strip():
        # nothing to continue from: not a question for a model
        return Completion("", None, empty_reason="no_prompt")
    rules = plan.rules if options.postprocess else MINIMAL
    route = plan.route or engine.route(Task.COMPLETION)
    result = engine.generate(
        Task.COMPLETION,
        plan.prompt,
        plan.config,
        route=route,
        tokens=plan.tokens,
        cancel=cancel,
        on_text=on_text,
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


def complete_at(
    engine: Engine,
    at: Cursor,
    settings: Settings,
    *,
    cancel: threading.Event,
    request: Request = Request(),
    options: PipelineOptions = PipelineOptions(),
    on_text: Callable[[str], None] | None = None,
) -> tuple[CompletionPlan, Completion]:
    """The completion at `at` (on a worker thread), with the plan it ran. Raises PositionError."""
    plan = plan_at(engine, at, settings, request, options)
    done = run_completion(
        engine,
        plan,
        at.text,
        at.language_id,
        cancel=cancel,
        options=options,
        tree=at.tree,
        on_text=on_text,
    )
    return plan, done
