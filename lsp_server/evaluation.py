"""`fastcomplete eval`: line completion on any source tree, through the server's own pipeline.

Cursor positions are cut inside real lines (deterministically, from a seed); the expected answer
is the rest of the line. The document the model sees is the file with that rest deleted, as when
a user is typing it. Reported per model: exact match, edit similarity, the share of shown
completions that add syntax errors, and latency p50/p95.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.engine import Engine
from inference.router import FAST, STANDARD
from lsp_server.completion import (
    PipelineOptions,
    adds_syntax_errors,
    plan_for_engine,
    run_completion,
)
from lsp_server.settings import Settings
from lsp_server.syntax import EXTENSIONS

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
            "latency_p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1) if lat else None,
        }


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
    for case in cases:
        started = time.perf_counter()
        plan = plan_for_engine(
            engine,
            case.document,
            case.line,
            case.character,
            settings,
            language_id=case.language,
            path="/".join(Path(case.path).parts[-2:]),
            options=options,
        )
        done = run_completion(
            engine, plan, case.document, case.language, cancel=threading.Event(), options=options
        )
        scores.latencies_ms.append((time.perf_counter() - started) * 1000)
        scores.cases += 1
        got = done.text
        scores.exact += got.strip() == case.expected.strip()
        scores.similarity += edit_similarity(got.strip(), case.expected.strip())
        if got:
            scores.shown += 1
            scores.syntax_errors += adds_syntax_errors(
                case.document, plan.offset, got, case.language
            )
    return scores


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
    head = "| pipeline | model | exact match % | edit similarity % | shown | syntax errors % of shown | p50 ms | p95 ms |"
    print(head)
    print("|" + "---|" * 8)
    for name, variants in report.items():
        for variant, s in variants.items():
            print(
                f"| {name} | {variant} | {s['exact_match']} | {s['edit_similarity']} | "
                f"{s['shown']} | {s['syntax_error_rate']} | {s['latency_p50_ms']} | "
                f"{s['latency_p95_ms']} |"
            )
