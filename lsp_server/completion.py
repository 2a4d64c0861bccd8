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
from inference.generate import GenerationConfig
from inference.manifest import FimTemplate
from inference.router import Route, RoutingError, Task
from lsp_server.context import AboveWindow, Snippet, build_context, window_start
from lsp_server.documents import edit_tree
from lsp_server.positions import offset_at
from lsp_server.postprocess import MINIMAL, RULES, Site, postprocess
from lsp_server.settings import Settings
from lsp_server.syntax import parser_for, tree_issues

BLOCK_OPENERS = (":", "{", "(", "[", "=>")
CHARS_PER_TOKEN = 3  # only when no tokenizer is loaded yet
SINGLE_LINE_DEADLINE_S = 1.5
MULTI_LINE_DEADLINE_S = 4.0
DRAFT_TOKENS = 8


@dataclass(frozen=True)
class PipelineOptions:
    """Switches for the eval's ablations; the server runs with everything on."""

    context: bool = True  # tree-sitter context builder; False: the raw prefix window only
    heal: bool = True
    postprocess: bool = True
    syntax_check: bool = True
    header: str = "comment"  # how the prompt names the file: "comment", "filename" or "none"


@dataclass(frozen=True)
class CompletionPlan:
    prompt: str
    config: GenerationConfig
    site: Site
    offset: int
    route: Route | None = None  # which models serve, in order (None: plan made without an engine)
    tokens: Tokens | None = None  # `prompt` encoded by the first loaded model of the route


@dataclass
class Completion:
    text: str  # what the editor shows ("" for nothing)
    result: EngineResult | None
    syntax_rejected: bool = False  # a completion was dropped because it broke the syntax
    retried_on_standard: bool = False


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
) -> CompletionPlan:
    """Raises PositionError for a position outside the document. `tree`: `text` parsed."""
    offset = offset_at(text, line, character)
    line_prefix = text[:offset].rsplit("\n", 1)[-1]
    line_suffix = text[offset:].split("\n", 1)[0].removesuffix("\r")
    count = count_tokens or (lambda s: len(s) // CHARS_PER_TOKEN)
    if options.context:
        ctx = build_context(
            text,
            offset,
            language_id=language_id,
            path=path,
            budget_tokens=settings.contextTokens,
            count_tokens=count,
            snippets=snippets,
            fim=fim,
            header=options.header,
            tree=tree,
            above=above,
        )
        prompt, in_string = ctx.prompt, ctx.in_string_or_comment
    else:
        lines = text[:offset].split("\n")
        start = window_start(lines, len(lines) - 1, settings.contextTokens, count)
        prompt, in_string = "\n".join(lines[start:]), False
    single = is_single_line(line_prefix, line_suffix, settings.multiline) or (
        in_string and settings.multiline == "auto"
    )
    inside_word = bool(line_prefix) and (line_prefix[-1].isalnum() or line_prefix[-1] == "_")
    config = GenerationConfig(
        max_new_tokens=settings.maxTokens,
        stop_at_newline=single,
        stop_strings=() if single else ("\n\n\n",),
        deadline_s=SINGLE_LINE_DEADLINE_S if single else MULTI_LINE_DEADLINE_S,
        draft_tokens=DRAFT_TOKENS,
        heal=options.heal and inside_word,
    )
    return CompletionPlan(prompt, config, Site(line_prefix, line_suffix, single), offset)


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
) -> CompletionPlan:
    """The plan with its route decided and its prompt encoded once, by the model that serves
    first on that route (its tokenizer counts the budget; its FIM template shapes the prompt)."""
    route = engine.route(Task.COMPLETION, settings.fastMode) if engine else None
    model = engine.planning_model(route) if engine and route else None
    tokenizer = model.tokenizer if model else None
    plan = plan_completion(
        text,
        line,
        character,
        settings,
        language_id=language_id,
        path=path,
        count_tokens=(lambda s: len(tokenizer.encode(s, bos=False))) if tokenizer else None,
        snippets=snippets,
        fim=model.manifest.fim if model else None,
        options=options,
        tree=tree,
        above=above,
    )
    tokens = None
    if model is not None and plan.prompt.strip():
        tokens = Tokens(model.tokenizer_id, tuple(model.tokenizer.encode(plan.prompt)))
    return replace(plan, route=route, tokens=tokens)


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
    after_text = text[:offset] + insert + text[offset:]
    edited = tree.copy()
    edit_tree(edited, text, offset, offset, insert)
    after = parser.parse(after_text.encode("utf-8"), edited)
    return len(tree_issues(after)) > len(tree_issues(tree))


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
    """Generate, post-process and check one completion (on a worker thread)."""
    started = time.perf_counter()
    if not plan.prompt.strip():
        return Completion("", None)  # nothing to continue from: not a question for a model
    rules = RULES if options.postprocess else MINIMAL
    route = plan.route or engine.route(Task.COMPLETION)
    result = engine.generate(
        Task.COMPLETION, plan.prompt, plan.config, route=route, tokens=plan.tokens, cancel=cancel
    )
    shown = postprocess(result.text, plan.site, rules)
    if not shown or not options.syntax_check:
        return Completion(shown, result)
    if not adds_syntax_errors(text, plan.offset, shown, language_id, tree):
        return Completion(shown, result)
    # Broken syntax: one more try where the route says, while the time budget allows.
    retry = route.quality_retry(result.variant)
    left = (plan.config.deadline_s or 0) - (time.perf_counter() - started)
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
            return Completion("", result, syntax_rejected=True)
        shown = postprocess(again.text, plan.site, rules)
        if shown and not adds_syntax_errors(text, plan.offset, shown, language_id, tree):
            return Completion(shown, again, syntax_rejected=True, retried_on_standard=True)
    return Completion("", result, syntax_rejected=True)
