"""A completion's plan, made once per request: document + cursor -> the context, the serving
plan of the engine (which model, its tokenizer and FIM form), the prompt's token ids and the
generation settings. `plan_at` is the one entry used by the server, `fastcomplete eval` and
`fastcomplete complete`, so that each plans exactly what the editor gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tree_sitter import Tree

from inference.engine import Engine
from inference.generate import GenerationConfig
from inference.manifest import FimTemplate
from inference.router import Route, Task
from inference.serving import ServingPlan, Tokens
from inference.tuning import NAMES_BONUS_LOGITS
from lsp_server.completion.postprocess import NEXT_LINE, RULES, Rule, Site, block_floor
from lsp_server.config.settings import Settings
from lsp_server.config.tuning import (
    CHARS_PER_TOKEN,
    DRAFT_TOKENS,
    FIM_SUFFIX_TOKENS,
    MULTI_LINE_DEADLINE_S,
    PREFETCH_DEADLINE_S,
    RECENT_NAMES_BONUS_LOGITS,
    SCORED_SUFFIX_CHARS,
    SCORED_SUFFIX_LINES,
    SHORT_MIN_TOKENS,
    SHORT_STEP_LINES,
    SINGLE_LINE_DEADLINE_S,
    T_KEY_SUFFIX_MS,
)
from lsp_server.prompting.context import (
    WINDOW_STEP_LINES,
    AboveWindow,
    build_context,
    window_start,
)
from lsp_server.prompting.names import (
    RepoNames,
    name_rests,
    recent_rests,
    starts_a_name,
    word_before,
)
from lsp_server.text.positions import offset_at
from lsp_server.text.uris import prompt_path
from lsp_server.workspace.snippet import Snippet

BLOCK_OPENERS = (":", "{", "(", "[", "=>")


@dataclass(frozen=True)
class PipelineOptions:
    """Switches for the eval's ablations; the server runs with everything on."""

    context: bool = True  # tree-sitter context builder; False: the raw prefix window only
    heal: bool = True
    postprocess: bool = True
    syntax_check: bool = True
    header: str = "comment"  # how the prompt names the file: "comment", "filename" or "none"
    suffix_scoring: bool = True  # rank candidates by how likely they make the code after them
    names: bool = True  # keep an identifier's first tokens on names that exist (prompting.names)
    index_snippets: bool = True  # the workspace index's windows like the code being written
    definitions: bool = True  # the definitions of the names the code uses, from the index


@dataclass(frozen=True)
class CompletionPlan:
    prompt: str
    config: GenerationConfig
    site: Site
    offset: int
    serving: ServingPlan | None = None  # which models serve (None: planned without an engine)
    tokens: Tokens | None = None  # `prompt` encoded by the model that serves first
    # The whole-context plan when this one is the short plan of a cold prompt: to be prefilled
    # in the background after answering, so that the next keystroke gets the whole context.
    deferred: CompletionPlan | None = None
    rules: tuple[Rule, ...] = RULES  # post-processing (the eval's ablation may still pick MINIMAL)
    candidates: int = 1  # distinct items to answer with (an explicit request asks for more)
    # The code after the cursor that candidates are ranked by ("" : the first one is shown).
    score_suffix: str = ""

    @property
    def route(self) -> Route | None:
        return self.serving.route if self.serving is not None else None


@dataclass(frozen=True)
class Cursor:
    """Where a completion is asked: the document as the editor has it, and the cursor in it."""

    text: str
    line: int
    character: int  # UTF-16
    language_id: str
    uri: str  # the prompt names the file as prompt_path names this URI
    tree: Tree | None = None  # `text` parsed, when the caller has it


@dataclass(frozen=True)
class Request:
    """What else a completion is asked with: the repository's context, and its shape."""

    snippets: tuple[Snippet, ...] = ()
    repo: str = ""  # the workspace folder's name, for a repository-level prompt
    above: AboveWindow | None = None  # the server's memory of the window above the cursor
    prefill_budget_s: float | None = None  # a colder prompt is planned short (coldContext)
    candidates: int = 1  # distinct items to answer with
    ahead: bool = False  # a prefetch: at a line's end, the suggestion for the line after it
    repo_names: RepoNames | None = None  # names the repository defines (the index), by prefix
    recent_names: tuple[str, ...] = ()  # names the person's recent edits brought in


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
    suffix_tokens: int | None = None,
    step_lines: int = WINDOW_STEP_LINES,
    candidates: int = 1,
    repo: str = "",
    repo_names: RepoNames | None = None,
    recent_names: tuple[str, ...] = (),
) -> CompletionPlan:
    """Raises PositionError for a position outside the document. `tree`: `text` parsed.
    `budget_tokens`: the prompt's budget (default: the contextTokens setting). `candidates`:
    how many distinct items the answer may hold."""
    offset = offset_at(text, line, character)
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
            suffix_tokens=suffix_tokens,
        )
        prompt, in_string = ctx.prompt, ctx.in_string_or_comment
    else:
        prompt, in_string = _prefix_window(text, offset, budget, count, step_lines), False
    site = _site(text, offset, settings.multiline, in_string)
    known = options.names and settings.knownNames
    rests, bonus = _name_hints(
        site, text, offset, in_string, known, language_id, snippets, repo_names, recent_names
    )
    config = _generation_config(settings, site, rests, bonus, heal=options.heal)
    score_suffix = _ranking_suffix(text, offset, options, settings, fim, candidates)
    return CompletionPlan(
        prompt, config, site, offset, candidates=candidates, score_suffix=score_suffix
    )


def _ranking_suffix(
    text: str,
    offset: int,
    options: PipelineOptions,
    settings: Settings,
    fim: FimTemplate | None,
    candidates: int,
) -> str:
    """The code after the cursor that candidates are ranked by, or "": a FIM prompt already
    holds it."""
    ranked = options.suffix_scoring and fim is None and (candidates > 1 or settings.suffixScoring)
    return scoring_suffix(text, offset) if ranked else ""


def _prefix_window(
    text: str, offset: int, budget: int, count: Callable[[str], int], step_lines: int
) -> str:
    """The raw prefix window, without the context builder (the eval's ablation)."""
    lines = text[:offset].split("\n")
    start = window_start(lines, len(lines) - 1, budget, count, step_lines)
    return "\n".join(lines[start:])


def _site(text: str, offset: int, multiline: str, in_string: bool) -> Site:
    """The cursor's line around it, and whether the answer is one line: a string or comment
    being typed is finished on its line unless the multiline setting says otherwise."""
    line_prefix = text[:offset].rsplit("\n", 1)[-1]
    line_suffix = text[offset:].split("\n", 1)[0].removesuffix("\r")
    single = is_single_line(line_prefix, line_suffix, multiline) or (
        in_string and multiline == "auto"
    )
    return Site(line_prefix, line_suffix, single)


def _name_hints(
    site: Site,
    text: str,
    offset: int,
    in_string: bool,
    known: bool,
    language_id: str,
    snippets: Sequence[Snippet],
    repo_names: RepoNames | None,
    recent_names: tuple[str, ...],
) -> tuple[tuple[str, ...], float]:
    """The rests of the names the answer's first tokens are kept on, and the bonus they get: the
    names that finish the word being typed, or where a name starts, those the recent edits
    brought in. `known`: the knownNames setting and the eval's switch."""
    word = word_before(site.line_prefix, site.line_suffix) if known else ""
    if word:
        typed_at = offset - len(word)
        rests = name_rests(word, text, language_id, snippets, repo_names, typed_at=typed_at)
        return rests, NAMES_BONUS_LOGITS
    if known and not in_string and starts_a_name(site.line_prefix):
        return recent_rests(recent_names, language_id), RECENT_NAMES_BONUS_LOGITS
    return (), NAMES_BONUS_LOGITS


def _may_heal(line_prefix: str) -> bool:
    """Whether the token before the cursor may be one the model would have written longer: in
    a word, after a space, or in the indentation."""
    inside_word = bool(line_prefix) and (line_prefix[-1].isalnum() or line_prefix[-1] == "_")
    after_space = line_prefix.endswith((" ", "\t")) and bool(line_prefix.strip())
    indented = bool(line_prefix) and not line_prefix.strip()
    return inside_word or after_space or indented


def _generation_config(
    settings: Settings, site: Site, rests: tuple[str, ...], bonus: float, *, heal: bool
) -> GenerationConfig:
    """How the answer is generated: one line or a block, within its deadline."""
    single = site.single_line
    return GenerationConfig(
        max_new_tokens=settings.maxTokens,
        stop_at_newline=single,
        stop_strings=() if single else ("\n\n\n",),
        block_indent=None if single else block_floor(site),
        deadline_s=SINGLE_LINE_DEADLINE_S if single else MULTI_LINE_DEADLINE_S,
        draft_tokens=DRAFT_TOKENS,
        heal=heal and _may_heal(site.line_prefix),
        stop_looping=True,
        name_rests=rests,
        names_first_bonus=bonus,
    )


def suffix_budget(s_per_token: float) -> int:
    """The code after the cursor a FIM prompt holds, in tokens: every key typed before it
    computes it again, so it is all of FIM_SUFFIX_TOKENS where that fits T_KEY_SUFFIX_MS at this
    prefill rate (a GPU), else 0: the rest of the cursor's line only (two cores). On 60 held-out
    positions Qwen 0.5B's exact match was 25.0% with no lines after the cursor, 21.7% with 128
    tokens of them and 15.0% with 24 (a few lines misled it more than none);
    docs/cpu-code-model.md."""
    fits = FIM_SUFFIX_TOKENS * s_per_token <= T_KEY_SUFFIX_MS / 1000
    return FIM_SUFFIX_TOKENS if fits else 0


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
    repo_names: RepoNames | None = None,
    recent_names: tuple[str, ...] = (),
) -> CompletionPlan:
    """The plan with its route decided and its prompt encoded once, by the model that serves
    first on that route (its tokenizer counts the budget; its FIM template shapes the prompt).

    `prefill_budget_s`: when the prompt's uncached part would take longer to prefill, the plan
    is a short one from the nearest lines that fits the budget, carrying the whole one as
    `deferred`."""
    serving = engine.serving_plan(Task.COMPLETION, settings.fastMode) if engine else None

    def plan(**shape: object) -> CompletionPlan:
        made = plan_completion(
            text,
            line,
            character,
            settings,
            language_id=language_id,
            path=path,
            count_tokens=serving.count_tokens() if serving else None,
            fim=serving.fim if serving else None,
            suffix_tokens=suffix_budget(serving.prefill_s_per_token) if serving else None,
            options=options,
            tree=tree,
            candidates=candidates,
            repo=repo,
            repo_names=repo_names,
            recent_names=recent_names,
            **shape,  # type: ignore[arg-type]
        )
        tokens = serving.encode(made.prompt) if serving else None
        return replace(made, serving=serving, tokens=tokens)

    whole = plan(snippets=snippets, above=above)
    return _short_when_cold(
        whole,
        serving,
        prefill_budget_s,
        settings.contextTokens,
        lambda budget: plan(budget_tokens=budget, step_lines=SHORT_STEP_LINES),
    )


def _short_when_cold(
    whole: CompletionPlan,
    serving: ServingPlan | None,
    prefill_budget_s: float | None,
    context_tokens: int,
    plan_short: Callable[[int], CompletionPlan],
) -> CompletionPlan:
    """`whole`, or where its uncached part would take longer than `prefill_budget_s` to
    prefill, the plan `plan_short` makes within the tokens that fit, carrying `whole` as
    `deferred`. Either way the prefill the budget accepted is added to the plan's deadline."""
    if prefill_budget_s is None or serving is None or whole.tokens is None:
        return whole
    estimate_s = serving.prefill_estimate_s(whole.tokens)
    if estimate_s <= prefill_budget_s:
        return _deadline_after_prefill(whole, estimate_s)
    rate = serving.prefill_s_per_token
    short = plan_short(max(SHORT_MIN_TOKENS, min(context_tokens, int(prefill_budget_s / rate))))
    if short.tokens is None or 2 * len(short.tokens.ids) > estimate_s / rate:
        # Hardly shorter than what is left to prefill: not worth less context.
        return _deadline_after_prefill(whole, estimate_s)
    short_s = min(prefill_budget_s, serving.prefill_estimate_s(short.tokens))
    return replace(_deadline_after_prefill(short, short_s), deferred=whole)


def _deadline_after_prefill(plan: CompletionPlan, prefill_s: float) -> CompletionPlan:
    """The plan's deadline counted from when its prompt is prefilled: the budget let the request
    spend `prefill_s` on prefill (up to restPrefillMs at rest), and that time must not be taken
    from writing the answer (a fresh server's first asks timed out with nothing written)."""
    deadline = plan.config.deadline_s
    if deadline is None or prefill_s <= 0:
        return plan
    return replace(plan, config=replace(plan.config, deadline_s=deadline + prefill_s))


def next_line_plan(plan: CompletionPlan) -> CompletionPlan:
    """At the end of a line, the plan for its rest or, where the model ends the line first (it
    was done), for the line after it: a suggestion that starts with the newline and the next
    line's indentation, as a person pausing at a finished line's end, or after an accepted
    suggestion ended one, wants next. Mid-line and block plans are returned as they are."""
    if plan.site.line_suffix.strip() or not plan.config.stop_at_newline:
        return plan  # mid-line, or already a block
    config = replace(plan.config, next_line=True, block_indent=None)  # the next line may dedent
    site = replace(plan.site, single_line=False)
    deferred = next_line_plan(plan.deferred) if plan.deferred is not None else None
    return replace(plan, config=config, site=site, rules=NEXT_LINE, deferred=deferred)


def plan_at(
    engine: Engine | None,
    at: Cursor,
    settings: Settings,
    request: Request = Request(),
    options: PipelineOptions = PipelineOptions(),
) -> CompletionPlan:
    """The plan at `at`, as the server makes it. Raises PositionError."""
    plan = plan_for_engine(
        engine,
        at.text,
        at.line,
        at.character,
        settings,
        language_id=at.language_id,
        path=prompt_path(at.uri),
        snippets=request.snippets,
        options=options,
        tree=at.tree,
        above=request.above,
        prefill_budget_s=request.prefill_budget_s,
        candidates=request.candidates,
        repo=request.repo,
        repo_names=request.repo_names,
        recent_names=request.recent_names,
    )
    if request.ahead:
        deadline = max(plan.config.deadline_s or 0.0, PREFETCH_DEADLINE_S)
        plan = replace(plan, config=replace(plan.config, deadline_s=deadline))
    at_line_end = request.ahead or settings.multiline != "never"  # "never": this line only
    return next_line_plan(plan) if at_line_end else plan
