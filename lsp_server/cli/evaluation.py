"""`fastcomplete eval`: line completion on any source tree, through the server's own pipeline.

Cursor positions are cut inside real lines (deterministically, from a seed); the expected answer
is the rest of the line. The document the model sees is the file with that rest deleted, as when
a user is typing it. Reported per model: exact match, edit similarity, the share of shown
completions that add syntax errors, and latency p50/p95.
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import sysconfig
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.engine import Engine
from inference.metrics import percentile
from inference.router import FAST, STANDARD
from lsp_server.completion.plan import PipelineOptions
from lsp_server.completion.planner import Planner, View
from lsp_server.completion.run import adds_syntax_errors
from lsp_server.config.settings import Settings
from lsp_server.prompting.names import NAME, word_before
from lsp_server.serving.notices import Notices
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Documents, Snapshot, snapshot_of
from lsp_server.text.languages import EXTENSIONS, language_names
from lsp_server.workspace.exclusions import SKIPPED_DIRS, Exclusions
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.index.files import read_text
from lsp_server.workspace.recent_edits import RecentEdits

CASES_PER_FILE = 4
EVAL_SETTINGS = Settings(multiline="never")  # the task is the rest of one line
MIN_LINE = 16  # characters of code in a line worth cutting
ABLATIONS = {
    "full pipeline": PipelineOptions(),
    "raw prefix (no context builder)": PipelineOptions(context=False),
    "no token healing": PipelineOptions(heal=False),
    "no post-processing": PipelineOptions(postprocess=False, syntax_check=False),
    "path as <filename> token": PipelineOptions(header="filename"),
    "no path": PipelineOptions(header="none"),
}


@dataclass(frozen=True)
class Case:
    path: str
    language: str
    document: str  # the file with the rest of the cut line removed
    line: int
    character: int  # UTF-16, as an editor sends it
    expected: str


@dataclass
class Scores:
    cases: int = 0
    shown: int = 0
    exact: int = 0
    similarity: float = 0.0
    syntax_errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)  # choosing the repository context
    # The cursor inside a word (`San|dboxAgent`), where a prompt ends in a token fragment, and
    # between tokens (after `(`, `.`, a space): [cases, exact] each.
    mid_word: list[int] = field(default_factory=lambda: [0, 0])
    between: list[int] = field(default_factory=lambda: [0, 0])
    # Shown suggestions that spell a name existing nowhere in the repository (nor the language);
    # None when no repository was read (the file-list eval).
    invented: int | None = None

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        return {
            "cases": self.cases,
            "exact_match": round(100 * self.exact / self.cases, 1) if self.cases else None,
            "edit_similarity": round(100 * self.similarity / self.cases, 1) if self.cases else None,
            "shown": self.shown,
            "syntax_error_rate": round(100 * self.syntax_errors / self.shown, 1)
            if self.shown
            else 0.0,
            "latency_p50_ms": round(statistics.median(lat), 1) if lat else None,
            "latency_p95_ms": round(percentile(lat, 0.95), 1) if lat else None,
            "context_p50_ms": round(statistics.median(self.context_ms), 1)
            if self.context_ms
            else None,
            "mid_word_cases": self.mid_word[0],
            "mid_word_exact": _share(self.mid_word),
            "between_tokens_cases": self.between[0],
            "between_tokens_exact": _share(self.between),
            "invented_names": self.invented,
        }


def _share(counts: list[int]) -> float | None:
    return round(100 * counts[1] / counts[0], 1) if counts[0] else None


def is_mid_word(document: str, offset: int, expected: str) -> bool:
    """The cursor splits an identifier: a word character on both sides of it."""
    before = document[:offset][-1:]
    after = expected[:1]
    return bool(before and after) and all(c.isalnum() or c == "_" for c in before + after)


def default_roots() -> list[Path]:
    """Python's standard library here, plus the VS Code extension's TS/JS dependencies if installed."""
    roots = [Path(sysconfig.get_paths()["stdlib"])]
    node_modules = Path(__file__).resolve().parent.parent / "editors" / "vscode" / "node_modules"
    if node_modules.is_dir():
        roots.append(node_modules)
    return roots


def _files(roots: list[Path], language: str | None) -> list[Path]:
    found = []
    for root in roots:
        candidates = [root] if root.is_file() else root.rglob("*")
        for path in candidates:
            lang = EXTENSIONS.get(path.suffix)
            if lang is None or (language and lang != language) or not path.is_file():
                continue
            if "test" in path.name or path.stat().st_size > 200_000:
                continue
            found.append(path)
    return sorted(found)


def _cut_points(text: str, rng: random.Random) -> list[tuple[int, int, str]]:
    """(line, column, expected rest) for up to CASES_PER_FILE lines, in file order."""
    lines = text.split("\n")
    usable = [
        i
        for i, row in enumerate(lines)
        if len(row.strip()) >= MIN_LINE
        and not row.lstrip().startswith(("#", "//", "*", "/*"))
        and i > 5
    ]
    chosen = sorted(rng.sample(usable, min(CASES_PER_FILE, len(usable))))
    cuts = []
    for i in chosen:
        row = lines[i]
        indent = len(row) - len(row.lstrip())
        code = len(row.rstrip()) - indent
        col = indent + rng.randint(code // 3, (2 * code) // 3)
        cuts.append((i, col, row[col:].rstrip()))
    return cuts


def collect_cases(roots: list[Path], language: str | None, n: int, seed: int = 0) -> list[Case]:
    rng = random.Random(seed)
    files = _files(roots, language)
    rng.shuffle(files)
    cases: list[Case] = []
    for path in files:
        if len(cases) >= n:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        lines = text.split("\n")
        for line, col, expected in _cut_points(text, rng):
            if len(cases) >= n:
                break
            doc_lines = [*lines[:line], lines[line][:col], *lines[line + 1 :]]
            utf16 = len(lines[line][:col].encode("utf-16-le")) // 2
            cases.append(
                Case(
                    str(path), EXTENSIONS[path.suffix], "\n".join(doc_lines), line, utf16, expected
                )
            )
    return cases


def edit_similarity(a: str, b: str) -> float:
    if not a and not b:
        return 1.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1.0 - prev[-1] / max(len(a), len(b))


def evaluate(
    engine: Engine,
    cases: list[Case],
    *,
    fast_mode: bool,
    options: PipelineOptions,
    settings: Settings = EVAL_SETTINGS,
) -> Scores:
    scores = Scores()
    settings = dataclasses.replace(settings, fastMode=fast_mode)
    workspace = LoadedWorkspace(None, Exclusions(None))
    for case in cases:
        planner = eval_planner(engine, settings, workspace, options)  # a file just opened
        snap, view = opened(planner, case)
        started = time.perf_counter()
        plan, done = planner.plan_and_run(snap, view, threading.Event())
        scores.latencies_ms.append((time.perf_counter() - started) * 1000)
        tally(scores, case, done.text, plan.offset)
    return scores


@dataclass(frozen=True)
class LoadedModels:
    """The eval's engine, its models loaded: what the planner asks of the server's models."""

    engine: Engine
    serving: bool = True


@dataclass(frozen=True)
class LoadedWorkspace:
    """The eval's workspace index (built before it starts), as the server's indexer holds one."""

    index: WorkspaceIndex | None
    exclusions: Exclusions


def eval_planner(
    engine: Engine, settings: Settings, workspace: LoadedWorkspace, options: PipelineOptions
) -> Planner:
    """The server's own planner (lsp_server.completion.planner) over a loaded engine: the
    repository's snippets, recent edits (none here), names and the window above the cursor,
    chosen exactly as an editor's request gets them."""
    return Planner(
        settings=lambda: settings,
        models=LoadedModels(engine),
        workspace=workspace,
        edits=RecentEdits(lambda uri: None),
        notices=Notices(),
        telemetry=Telemetry(Documents(), lambda: settings, lambda coro: coro.close()),
        options=options,
    )


def opened(planner: Planner, case: Case) -> tuple[Snapshot, View]:
    """The case's file open in an editor (parsed, named in the prompt as the server names it),
    and what planning sees at its cursor."""
    documents = Documents()
    uri = Path(case.path).resolve().as_uri()
    documents.open(uri, case.document, 1, case.language)
    snap = snapshot_of(documents, uri)
    return snap, planner.cursor_view(snap, case.line, case.character)


def invents_a_name(document: str, offset: int, got: str, known: Collection[str]) -> bool:
    """`got` spells an identifier (the one it finishes at the cursor included) that `known` lacks."""
    line_prefix = document[document.rfind("\n", 0, offset) + 1 : offset]
    text = word_before(line_prefix, "") + got
    return any(name not in known for name in NAME.findall(text))


def tally(
    scores: Scores, case: Case, got: str, offset: int, known: Collection[str] | None = None
) -> None:
    scores.cases += 1
    right = got.strip() == case.expected.strip()
    scores.exact += right
    kind = scores.mid_word if is_mid_word(case.document, offset, case.expected) else scores.between
    kind[0] += 1
    kind[1] += right
    scores.similarity += edit_similarity(got.strip(), case.expected.strip())
    if got:
        scores.shown += 1
        scores.syntax_errors += adds_syntax_errors(case.document, offset, got, case.language)
    if known is not None:
        invented = bool(got) and invents_a_name(case.document, offset, got, known)
        scores.invented = (scores.invented or 0) + invented


def run_eval(
    engine: Engine, cases: list[Case], ablations: dict[str, PipelineOptions]
) -> dict[str, dict[str, dict[str, Any]]]:
    """{ablation: {variant: summary}}."""
    engine.load(FAST)
    engine.load(STANDARD)
    report: dict[str, dict[str, dict[str, Any]]] = {}
    for name, options in ablations.items():
        report[name] = {}
        for variant, fast_mode in ((FAST, True), (STANDARD, False)):
            report[name][variant] = evaluate(
                engine, cases, fast_mode=fast_mode, options=options
            ).summary()
    return report


def print_report(report: dict[str, dict[str, dict[str, Any]]], cases: int) -> None:
    print(f"line completion, {cases} cursor positions cut inside real lines\n")
    head = "| pipeline | model | exact match % | edit similarity % | mid-word exact % (n) | between tokens exact % (n) | shown | syntax errors % of shown | names nowhere in the repository | p50 ms | p95 ms | context p50 ms |"
    print(head)
    print("|" + "---|" * 12)
    for name, variants in report.items():
        for variant, s in variants.items():
            print(
                f"| {name} | {variant} | {s['exact_match']} | {s['edit_similarity']} | "
                f"{s['mid_word_exact']} ({s['mid_word_cases']}) | "
                f"{s['between_tokens_exact']} ({s['between_tokens_cases']}) | {s['shown']} | {s['syntax_error_rate']} | "
                f"{'-' if s['invented_names'] is None else s['invented_names']} | {s['latency_p50_ms']} | "
                f"{s['latency_p95_ms']} | {s['context_p50_ms'] or '-'} |"
            )


# -- a repository as the workspace -------------------------------------------------------------


@dataclass(frozen=True)
class RepoRow:
    """One ablation of what the rest of the repository and the code after the cursor add."""

    index_snippets: bool = True
    definitions: bool = True
    suffix_scoring: bool = True
    names: bool = True  # names that exist (lsp_server/prompting/names.py)

    def options(self) -> PipelineOptions:
        return PipelineOptions(
            suffix_scoring=self.suffix_scoring,
            names=self.names,
            index_snippets=self.index_snippets,
            definitions=self.definitions,
        )


WORKSPACE_ROWS = {
    "file only (before the index)": RepoRow(False, False, False),
    "workspace: snippets + definitions + suffix scoring": RepoRow(),
    "without workspace snippets": RepoRow(index_snippets=False),
    "without symbol definitions": RepoRow(definitions=False),
    "without suffix scoring": RepoRow(suffix_scoring=False),
    "without names that exist": RepoRow(names=False),
}


def workspace_cases(root: Path, n: int, seed: int, exclusions: Exclusions) -> list[Case]:
    """Cases from the repository's own files, as the index would see them."""
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not exclusions.excluded(here / d, is_dir=True)
            and not exclusions.ignored(here / d, is_dir=True)
        ]
        files += [
            here / name
            for name in names
            if not exclusions.excluded(here / name) and not exclusions.ignored(here / name)
        ]
    return collect_cases(sorted(files), None, n, seed)


def run_workspace_eval(
    engine: Engine,
    root: Path,
    cases: list[Case],
    rows: dict[str, RepoRow],
    variants: tuple[str, ...] = (FAST, STANDARD),
    store_dir: Path | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{row: {variant: summary}}. Each case's file is open in the editor and its saved copy is
    kept out of the index, so the cut line cannot leak. Latency is measured on a warm prompt
    (the file open for a while), and the repository context's own cost (choosing snippets and
    definitions for a new block) is reported apart, as `context_p50_ms`."""
    exclusions = Exclusions(root)
    index = WorkspaceIndex(root, store_dir, exclusions=exclusions)
    index.build()
    workspace = LoadedWorkspace(index, exclusions)
    repo_known = repository_names(index)
    known: dict[str, set[str]] = {}  # by language: the repository's names and the language's
    for variant in variants:
        engine.load(variant)
    scores = {(name, v): Scores() for name in rows for v in variants}
    for case in cases:
        if case.language not in known:
            known[case.language] = repo_known | language_names(case.language)
        for (name, variant), row_scores in scores.items():
            row = rows[name]
            # A planner per case: each case is a file just opened, nothing chosen for it yet.
            planner = eval_planner(engine, row_settings(row, variant), workspace, row.options())
            _score_case(engine, planner, case, row_scores, known[case.language])
    return {name: {v: scores[name, v].summary() for v in variants} for name in rows}


def row_settings(row: RepoRow, variant: str) -> Settings:
    """The settings an editor would send for `row`: the index, suffix scoring and known names
    are settings of the server's."""
    return dataclasses.replace(
        EVAL_SETTINGS,
        fastMode=variant == FAST,
        workspaceIndex=row.index_snippets or row.definitions,
        suffixScoring=row.suffix_scoring,
        knownNames=row.names,
    )


def repository_names(index: WorkspaceIndex) -> set[str]:
    """Every identifier in the indexed files: a suggestion's name outside these (and the
    language's) exists nowhere in the repository."""
    names: set[str] = set()
    for rel in index.paths():
        text = read_text(index.root / rel, index.limits)
        if text is not None:
            names.update(NAME.findall(text))
    return names


def _score_case(
    engine: Engine,
    planner: Planner,
    case: Case,
    scores: Scores,
    known: Collection[str] | None = None,
) -> None:
    """One case as the server answers it once the file has been open a while: its whole prompt
    prefilled first (latency on a warm prompt); the repository context's own cost (choosing
    snippets and definitions) measured apart, as `context_ms`."""
    snap, view = opened(planner, case)
    started = time.perf_counter()
    planner.request(snap, view)
    context_ms = (time.perf_counter() - started) * 1000
    warm = planner.plan(snap, view)
    if warm.serving is not None and warm.prompt.strip():
        engine.warm(warm.serving, warm.prompt, warm.tokens, threading.Event(), warm.config.heal)
    started = time.perf_counter()
    made, done = planner.plan_and_run(snap, view, threading.Event())
    scores.latencies_ms.append((time.perf_counter() - started) * 1000)
    scores.context_ms.append(context_ms)
    tally(scores, case, done.text, made.offset, known)
