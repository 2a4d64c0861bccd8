"""First ask in a just-opened file, cursor mid-file: what a person gets when they open a file and
start to finish a line somewhere in its middle.

    FASTCOMPLETE_HOME=/tmp/fchome .venv/bin/python bench/first_ask.py [--positions 90] [--quick]

Positions (seeded) are spread over Python (this project's own modules, which no model saw in
training, and a few standard-library files), TypeScript (the VS Code extension and its tests)
and Go (git's contrib/persistent-https, when installed). Each is a code line past the first 15%
of its file, cut at a random point with at least 4 characters on both sides; the rest of the line
is deleted from the document (not yet written) and is the ground truth.

For each position the client opens the cut document under a new uri, sends fastcomplete/didFocus
at the cursor at once (as VS Code does when an editor opens), and 50 ms later an automatic
inline-completion request there. Latency is measured at the client, from request to answer. The
run has two configurations, each on a fresh `fastcomplete serve` with an empty completion cache:
coldContext on (a cold prompt is answered from the nearest lines while the whole one is prefilled)
and off. Results go to bench/results/first_ask.json.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import asyncio
import contextlib
import json
import random
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_replay import (
    ask_inline,
    code_mask,
    did_close,
    did_focus,
    did_open,
    percentile,
    start_server,
    stop_server,
    utf16_len,
)

ROOT = Path(__file__).resolve().parent.parent
STDLIB_FILES = ("textwrap.py", "argparse.py", "json/decoder.py", "shutil.py")
GO_DIR = Path("/usr/share/doc/git/contrib/persistent-https")
MIN_CODE_CHARS = 20  # non-blank characters on a line worth completing
MIN_SIDE = 4  # characters kept before the cursor and deleted after it
SKIP_HEAD = 0.15  # the top of a file (imports, module docstring) is not where people finish lines
FOCUS_TO_ASK_S = 0.05
BETWEEN_S = 1.0
CONFIGS = {"coldContext on": {"coldContext": True}, "coldContext off": {"coldContext": False}}


@dataclass(frozen=True)
class Position:
    language: str  # LSP language id
    path: str  # the source file, for the report
    line: int
    column: int  # in code points, inside the line
    text: str  # the document with the rest of the line deleted
    truth: str  # the deleted rest of the line, rstripped

    @property
    def before_cursor(self) -> str:
        return self.text.split("\n")[self.line][: self.column]

    @property
    def cursor(self) -> types.Position:
        return types.Position(self.line, utf16_len(self.before_cursor))


@dataclass
class Outcome:
    language: str
    path: str
    line: int
    character: int
    truth: str
    shown: str
    answered: bool
    failed: bool  # an error response
    latency_ms: float | None
    exact: bool  # shown == truth
    prefix: bool  # the truth starts with what was shown
    doubled_space: bool  # shown starts with a space right after one before the cursor


def sources() -> dict[str, list[Path]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    python = [
        p
        for folder in ("lsp_server", "inference")
        for p in sorted((ROOT / folder).glob("*.py"))
        if p.name != "__init__.py"
    ]
    python += [stdlib / name for name in STDLIB_FILES if (stdlib / name).exists()]
    typescript = sorted((ROOT / "editors/vscode/src").glob("*.ts"))
    typescript += sorted((ROOT / "editors/vscode/test").glob("*.ts"))
    found = {"python": python, "typescript": typescript, "go": sorted(GO_DIR.glob("*.go"))}
    return {lang: files for lang, files in found.items() if files}


def code_lines(lines: list[str], language: str) -> list[int]:
    """Indexes of code lines past the head of the file, long enough to cut."""
    head = int(SKIP_HEAD * len(lines))
    return [
        i
        for i, code in enumerate(code_mask(lines, language))
        if code and i >= head and sum(not c.isspace() for c in lines[i]) >= MIN_CODE_CHARS
    ]


def cut(path: Path, language: str, index: int, rng: random.Random) -> Position | None:
    lines = path.read_text(encoding="utf-8").split("\n")
    line = lines[index].rstrip()
    indent = len(line) - len(line.lstrip())
    if len(line) - indent < 2 * MIN_SIDE + 1:
        return None
    column = rng.randint(indent + MIN_SIDE, len(line) - MIN_SIDE)
    truth = line[column:].rstrip()
    cut_lines = [*lines[:index], line[:column], *lines[index + 1 :]]
    try:
        shown_path = str(path.relative_to(ROOT))
    except ValueError:
        shown_path = str(path)
    return Position(language, shown_path, index, column, "\n".join(cut_lines), truth)


def positions(count: int, seed: int) -> list[Position]:
    """`count` positions spread evenly over the languages found, in a seeded shuffled order
    (so that languages interleave over the run)."""
    rng = random.Random(seed)
    by_language = sources()
    languages = sorted(by_language)
    eligible: dict[Path, list[int]] = {}
    for lang, files in by_language.items():
        for path in files:
            lines = path.read_text(encoding="utf-8").split("\n")
            if found := code_lines(lines, lang):
                eligible[path] = found
    picked: list[Position] = []
    for k, lang in enumerate(languages):
        want = count // len(languages) + (k < count % len(languages))
        files = [p for p in by_language[lang] if p in eligible]
        used: set[tuple[Path, int]] = set()
        tries = 0
        while want and files and tries < 100 * count:
            tries += 1
            path = rng.choice(files)
            index = rng.choice(eligible[path])
            if (path, index) in used:
                continue
            used.add((path, index))
            made = cut(path, lang, index, rng)
            if made is not None:
                picked.append(made)
                want -= 1
    rng.shuffle(picked)
    return picked


async def run_config(
    label: str,
    settings: dict[str, Any],
    cases: list[Position],
    ask_after_s: float = FOCUS_TO_ASK_S,
    focus: bool = True,
) -> dict[str, Any]:
    """`ask_after_s`: from didFocus (or didOpen, without `focus`) to the inline request."""
    served = await start_server(settings, "first-ask")
    client = served.client
    outcomes: list[Outcome] = []
    for i, case in enumerate(cases):
        # A new uri per position, named in the prompt's header as "<i>/<folder>/<file>": no two
        # prompts share a start, so nothing one position prefilled warms another.
        uri = f"file:///bench/first-ask/{i}/{Path(case.path).parent.name}/{Path(case.path).name}"
        did_open(client, uri, case.language, case.text)
        at = case.cursor
        if focus:
            did_focus(client, uri, at)  # VS Code: at once when an editor opens
        await asyncio.sleep(ask_after_s)
        asked = ask_inline(client, uri, at, f"first-ask-{i}")
        with contextlib.suppress(Exception):  # an error answer is recorded on `asked`
            await asyncio.wait_for(asyncio.shield(asked.future), timeout=60)
        await asyncio.sleep(0)  # let the done callback record the answer
        shown = asked.shown
        outcomes.append(
            Outcome(
                case.language,
                case.path,
                case.line,
                at.character,
                case.truth,
                shown,
                bool(shown),
                asked.failed,
                asked.latency_ms and round(asked.latency_ms, 1),
                bool(shown) and shown == case.truth,
                bool(shown) and case.truth.startswith(shown),
                shown[:1] in (" ", "\t") and case.before_cursor[-1:] in (" ", "\t"),
            )
        )
        did_close(client, uri)
        await asyncio.sleep(BETWEEN_S)
    stats = await stop_server(served)
    return {
        "config": label,
        "settings": settings,
        "ask_after_ms": round(ask_after_s * 1000),
        "did_focus": focus,
        "server_home": served.home,
        "summary": summarize(outcomes),
        "emptyReasons": stats.get("emptyReasons", {}),
        "server": stats.get("server", {}),
        "models": stats.get("models", {}),  # TTFT, prompt and reused tokens per model
        "events": stats.get("events", {}),  # the engine's: warmups, warmup_tokens, ...
        "positions": [asdict(o) for o in outcomes],
    }


def summarize(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.language, []).append(o)
    groups = dict(sorted(groups.items()))
    groups["total"] = outcomes
    summary = {}
    for name, group in groups.items():
        latencies = [o.latency_ms for o in group if o.latency_ms is not None]
        shown = sum(o.answered for o in group)
        exact = sum(o.exact for o in group)
        summary[name] = {
            "positions": len(group),
            "answered": shown,
            "answered_share": round(shown / len(group), 3) if group else None,
            "p50_ms": percentile(latencies, 0.5),
            "p95_ms": percentile(latencies, 0.95),
            "exact": exact,
            "prefix": sum(o.prefix for o in group),
            "doubled_space": sum(o.doubled_space for o in group),
            "exact_of_shown": round(exact / shown, 3) if shown else None,
            "exact_of_all": round(exact / len(group), 3) if group else None,
        }
    return summary


def print_config(result: dict[str, Any]) -> None:
    print(f"\n{result['config']}  (latency: every first ask, answered or not)\n")
    head = (
        f"{'language':<11} {'pos':>4} {'answered':>9} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'exact/shown':>12} {'prefix/shown':>13} {'exact/all':>10}"
    )
    print(head)
    for name, s in result["summary"].items():
        share = f"{100 * s['answered_share']:.0f}%" if s["answered_share"] is not None else "-"
        print(
            f"{name:<11} {s['positions']:>4} {share:>9} {s['p50_ms'] or '-':>8} "
            f"{s['p95_ms'] or '-':>8} {str(s['exact']) + '/' + str(s['answered']):>12} "
            f"{str(s['prefix']) + '/' + str(s['answered']):>13} "
            f"{(s['exact_of_all'] if s['exact_of_all'] is not None else '-'):>10}"
        )
    doubled = result["summary"]["total"]["doubled_space"]
    print(f"shown starting with a space right after a space: {doubled}")
    reasons = ", ".join(f"{k} {n}" for k, n in sorted(result["emptyReasons"].items()))
    print(f"empty reasons: {reasons or 'none'}")
    counters = ("requests", "answered", "short_context", "focus", "stale_dropped")
    print("server: " + ", ".join(f"{k} {result['server'].get(k, 0)}" for k in counters))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--positions", type=int, default=90)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 6 positions")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--ask-after-ms",
        default=str(round(FOCUS_TO_ASK_S * 1000)),
        help="comma-separated delays from focus to the first ask, one row each (e.g. 350,2000)",
    )
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help=f"comma-separated, of: {', '.join(CONFIGS)}"
    )
    parser.add_argument(
        "--no-focus",
        action="store_true",
        help="send no fastcomplete/didFocus (a plain LSP client): only didOpen, then the ask",
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/first_ask.json"))
    args = parser.parse_args()
    delays = [int(d) / 1000 for d in args.ask_after_ms.split(",")]
    labels = [c.strip() for c in args.configs.split(",")]
    if unknown := [c for c in labels if c not in CONFIGS]:
        parser.error(f"unknown config(s) {unknown}: choose from {list(CONFIGS)}")
    count = 6 if args.quick else args.positions
    cases = positions(count, args.seed)
    langs = sorted({c.language for c in cases})
    print(f"{len(cases)} positions over {', '.join(langs)}", file=sys.stderr)
    results = []
    for label in labels:
        for delay in delays:
            row = f"{label}, ask +{round(delay * 1000)} ms" if len(delays) > 1 else label
            started = time.perf_counter()
            done = run_config(row, CONFIGS[label], cases, delay, focus=not args.no_focus)
            results.append(asyncio.run(done))
            print(f"done: {row} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    opened = "didOpen" if args.no_focus else "didOpen, didFocus"
    print(f"\nfirst ask in a just-opened file ({opened}, then inlineCompletion)")
    for result in results:
        print_config(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"positions": len(cases), "seed": args.seed, "configs": results}, indent=2)
    )
    print(f"\nwritten to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
