"""Quality on code no model here has seen: three repositories created in 2025 or later (Python,
Go, TypeScript; bench/unseen_repos.py pins them), each with the server rooted at the repository
as an editor is. **github-mcp-server (Go) is kept UNSEEN while tuning**: it is measured and
reported beside the others (marked `*`), and nothing is chosen by it.

    .venv/bin/python bench/unseen_repos.py                       # once: materialise the pins
    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python bench/unseen.py asks [--n 20]
        [--rest-s 4] [--no-focus] [--single-files] [--repos a,b] [--ceiling]
    ... bench/unseen.py ceiling [--asks bench/results/unseen_asks.json] [--variants fast]
    ... bench/unseen.py keys [--regions 6] [--single-files] [--no-focus]
    ... bench/unseen.py positions [--n 20]                       # print the positions only

Models are read from $FASTCOMPLETE_HOME/models (FASTCOMPLETE_MODEL picks one); each server gets
a throwaway home of its own (empty caches, as bench/first_ask.py). The repositories are read from
$FASTCOMPLETE_HOME/unseen; nothing is downloaded here.

Positions (`asks`, `ceiling`, `positions`): per repository, `--n` (20) lines of its language's
files (the files the index reads; none with "test" in its name, none over 200 kB), at most
`--per-file` (1) per file, chosen from `--seed` (0): a code line past the file's first 6 lines,
16+ characters of code, cut between a third and two thirds of its code (`fastcomplete eval`'s
rule); the rest of the line is deleted from the document and is the expected answer. The same
seed gives the same positions on any machine (the pins fix the files).

`asks` - asks after a rest, through a real `fastcomplete serve`, one fresh server per repository,
models loaded before the first position, rooted at a copy of the repository (workspace folder in
`initialize`) from which the held-out files are **removed**: with the file gone the cut line
cannot reach the prompt through the index (no snippet, no definition, no name from it), whatever
the number of positions per file; the person's buffer (didOpen) is the file as they see it. The
alternative, the cut document written to disk, is exact for one position per file only and still
lets the index read a document the person has not saved. Removing costs the index a few files of
several hundred. Per position: didOpen of the cut document at its path in the copy; 150 ms later
`fastcomplete/didFocus` at the cursor; the cursor rests `--rest-s` s; one automatic inline
request; its answer awaited (60 s at most); didClose; 1 s. `--no-focus`: a client without
didFocus (open, the same 0.15 + rest s, ask). `--single-files`: no workspace folder (the files are
opened at the same paths). Numbers, per repository, for the two tuned on, and for all:
- exact: the answer's first line, stripped, equals the expected rest of the line, stripped (as
  `fastcomplete eval` tallies); an empty answer is a miss;
- edit sim: mean normalised Levenshtein similarity of the same two, x100;
- cold: asks answered from the short cold prompt (the server's `short_context` counter went up
  during the ask), of asks;
- p50/p95: client latency of the inline request, every ask;
- per ask the JSON also holds the prefill runs and interruptions during the ask (open to
  answer, from `fastcomplete.stats` -> `prefill`), the `ready_s` of the document's prefill
  record made during the ask if it got one (seconds from aimed at to the whole prompt cached:
  more than the rest means the ask came too soon), the index state and the empty reason when
  nothing was shown.
Written to bench/results/unseen_asks[_nofocus][_single].json (`--json`).

`ceiling` - the model alone, outside the product, on exactly the same positions:
bench/fim_ceiling.py's plain healed FIM prompt (1,200 tokens before the cursor, 300 after, file
only, greedy to the end of the line) for each variant in `--variants` (default fast, the product's
8-bit model; `standard` is FP32). With `--asks FILE` (or `asks --ceiling`, in one run) the
product's answers are put beside the ceiling's per position in
bench/results/unseen_side_by_side.json: position, expected, the product's answer and whether it
was cold, the ceiling's answer per variant; the table counts both right, product only, ceiling
only (and how many of those were cold), neither.

`keys` - keystrokes saved: bench/assist.py's simulated typist (log-normal gaps, median ~135 ms,
0.3-0.9 s more after a newline; VS Code's didChange/cancel/ask per key and didFocus after 150 ms
of rest) types `--regions` regions of 3-6 code lines per repository, from that repository's
files, the server rooted at a copy of it without the regions' files (`--single-files`: no root).
saved: 1 - keys used (typed + Tab) / keys to type the region alone; accepted/shown: Tabs of the
suggestions on screen when a key was due; late: answers with a suggestion that arrived after the
next key had gone out. Written to bench/results/unseen_keys[_nofocus][_single].json.
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
import shutil
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
from bench.unseen_repos import (
    UnseenRepo,
    checked_out,
    held_out_copy,
    pick,
    repo_dir,
    source_files,
)
from lsp_server.cli.evaluation import Case, edit_similarity

MIN_LINE = 16  # characters of code in a line worth cutting (as `fastcomplete eval`)
SKIP_LINES = 6  # the first lines of a file (as `fastcomplete eval`: `i > 5`)
PER_FILE = 1
FOCUS_AFTER_S = 0.15  # VS Code sends didFocus once the cursor has rested this long
REST_S = 4.0
BETWEEN_S = 1.0
ANSWER_TIMEOUT_S = 60.0
COMMENT_STARTS = ("#", "//", "*", "/*")
RESULTS = Path("bench/results")


@dataclass(frozen=True)
class Position:
    repo: str
    unseen: bool  # from the repository kept unseen while tuning
    path: str  # relative to the repository's root
    language: str
    line: int
    column: int  # code points into the line
    document: str  # the file with the rest of the cut line deleted
    expected: str  # the deleted rest of the line, right-stripped

    @property
    def key(self) -> str:
        return f"{self.repo}:{self.path}:{self.line + 1}:{self.column + 1}"

    @property
    def before_cursor(self) -> str:
        return self.document.split("\n")[self.line]

    @property
    def character(self) -> int:
        """The cursor's UTF-16 column, as an editor sends it."""
        return utf16_len(self.before_cursor)

    @property
    def cursor(self) -> types.Position:
        return types.Position(self.line, self.character)

    def case(self, root: Path) -> Case:
        """As `fastcomplete eval` (and bench/fim_ceiling.py) take a position."""
        return Case(
            str(root / self.path),
            self.language,
            self.document,
            self.line,
            self.character,
            self.expected,
        )

    def brief(self) -> dict[str, Any]:
        """The position for a report: everything but the document."""
        out = asdict(self)
        del out["document"]
        return {"key": self.key, **out, "before_cursor": self.before_cursor}


def cut_points(text: str, language: str, rng: random.Random, count: int) -> list[tuple[int, int]]:
    """(line, column) of up to `count` cuts in `text`, in file order: code lines (not blank, not
    a comment, not in a docstring or a block comment) past the first lines, 16+ characters of
    code, cut between a third and two thirds of the code."""
    lines = text.split("\n")
    mask = code_mask(lines, language)
    usable = [
        i
        for i, row in enumerate(lines)
        if i >= SKIP_LINES
        and mask[i]
        and len(row.strip()) >= MIN_LINE
        and not row.lstrip().startswith(COMMENT_STARTS)
    ]
    cuts = []
    for i in sorted(rng.sample(usable, min(count, len(usable)))):
        row = lines[i].rstrip()
        indent = len(row) - len(row.lstrip())
        code = len(row) - indent
        cuts.append((i, indent + rng.randint(code // 3, (2 * code) // 3)))
    return cuts


def cut(text: str, line: int, column: int) -> tuple[str, str]:
    """The document with line `line` cut at `column` (its rest deleted), and that rest."""
    lines = text.split("\n")
    row = lines[line].rstrip()
    return "\n".join([*lines[:line], row[:column], *lines[line + 1 :]]), row[column:].rstrip()


def repo_positions(
    repo: UnseenRepo, root: Path, n: int, seed: int, per_file: int = PER_FILE
) -> list[Position]:
    """`n` positions of `repo`'s language in the checkout at `root`, from `seed` alone."""
    rng = random.Random(seed)
    files = source_files(root, {repo.language})
    rng.shuffle(files)
    out: list[Position] = []
    for path in files:
        if len(out) >= n:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for line, column in cut_points(text, repo.language, rng, per_file):
            document, expected = cut(text, line, column)
            if not expected or len(out) >= n:
                continue
            rel = path.relative_to(root).as_posix()
            out.append(
                Position(
                    repo.name, repo.unseen, rel, repo.language, line, column, document, expected
                )
            )
    return out


def checkouts(repos: list[UnseenRepo]) -> dict[str, Path]:
    """The materialised checkouts; exits with the command to make them when one is missing."""
    roots = {}
    for repo in repos:
        root = repo_dir(repo)
        if not checked_out(repo, root):
            raise SystemExit(
                f"{root} is not {repo.name} at {repo.sha[:12]}: run "
                f".venv/bin/python bench/unseen_repos.py first"
            )
        roots[repo.name] = root
    return roots


def all_positions(args: argparse.Namespace) -> tuple[list[UnseenRepo], dict[str, list[Position]]]:
    repos = pick(args.repos)
    roots = checkouts(repos)
    by_repo = {
        r.name: repo_positions(r, roots[r.name], args.n, args.seed, args.per_file) for r in repos
    }
    return repos, by_repo


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def scored(answer: str, expected: str) -> tuple[bool, float]:
    """(exact, edit similarity) of an answer's first line against the expected rest of the line,
    both stripped, as `fastcomplete eval` tallies."""
    got = first_line(answer).strip()
    return bool(got) and got == expected.strip(), edit_similarity(got, expected.strip())


# -- asks after a rest -------------------------------------------------------------------------


@dataclass
class AskResult:
    key: str
    repo: str
    unseen: bool
    path: str
    line: int
    character: int
    before_cursor: str
    expected: str
    answer: str  # the first item's text, all of it
    exact: bool
    similarity: float
    latency_ms: float | None
    failed: bool  # an error response (or no answer in time)
    cold: bool  # answered from the short cold prompt
    prefill_runs: int  # prefills run during the ask (open to answer)
    prefill_interruptions: int
    ready_s: float | None  # this document's prefill record: seconds from aimed at to cached
    index_state: str | None  # the workspace index when the ask went out
    empty_reason: str | None  # why nothing was shown (the server's empty reasons), if nothing


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


async def ask_repo(
    repo: UnseenRepo,
    root: Path,
    positions: list[Position],
    settings: dict[str, Any],
    rest_s: float,
    focus: bool,
    rooted: bool,
    fresh: bool = False,
) -> dict[str, Any]:
    """One fresh server for `repo`'s positions, rooted at a copy without the held-out files;
    `fresh`: a server started with the editor for each position instead (the file opened while
    the model loads, as an editor opened on a file does)."""
    workspace = held_out_copy(root, {p.path for p in positions})
    try:
        started = time.perf_counter()
        folder = workspace if rooted else None
        served = await start_server(settings, "unseen", folder, wait=not fresh)
        load_s = time.perf_counter() - started
        client = served.client
        results: list[AskResult] = []
        for i, pos in enumerate(positions):
            if fresh and i:
                await stop_server(served)
                served = await start_server(settings, "unseen", folder, wait=False)
                client = served.client
            uri = (workspace / pos.path).as_uri()
            before = await client.command("fastcomplete.stats")
            did_open(client, uri, pos.language, pos.document)
            await asyncio.sleep(FOCUS_AFTER_S)
            if focus:
                did_focus(client, uri, pos.cursor)
            await asyncio.sleep(rest_s)
            index_state = (await client.command("fastcomplete.stats"))["index"].get("state")
            asked = ask_inline(client, uri, pos.cursor, f"unseen-{i}")
            with contextlib.suppress(Exception):  # an error answer is recorded on `asked`
                await asyncio.wait_for(asyncio.shield(asked.future), ANSWER_TIMEOUT_S)
            await asyncio.sleep(0)  # let the done callback record the answer
            after = await client.command("fastcomplete.stats")
            answer = asked.shown
            exact, similarity = scored(answer, pos.expected)
            counts = _delta(after["server"], before["server"])
            reasons = _delta(after.get("emptyReasons", {}), before.get("emptyReasons", {}))
            if counts.get("held_back"):
                reasons["held back by the show gate"] = counts["held_back"]
            # This document's prefill records made during the ask. Their line is the aim's where
            # the prefill began (didOpen's guess), which a nearby cursor continues.
            ready = [
                r["ready_s"]
                for r in after["prefill"]["ready"]
                if r["uri"] == uri and r not in before["prefill"]["ready"]
            ]
            results.append(
                AskResult(
                    pos.key,
                    pos.repo,
                    pos.unseen,
                    pos.path,
                    pos.line,
                    pos.character,
                    pos.before_cursor,
                    pos.expected,
                    answer,
                    exact,
                    round(similarity, 3),
                    asked.latency_ms and round(asked.latency_ms, 1),
                    asked.failed or asked.arrived is None,
                    counts.get("short_context", 0) > 0,
                    after["prefill"]["runs"] - before["prefill"]["runs"],
                    after["prefill"]["interruptions"] - before["prefill"]["interruptions"],
                    ready[-1] if ready else None,
                    index_state,
                    (",".join(sorted(reasons)) or None) if not answer else None,
                )
            )
            did_close(client, uri)
            await asyncio.sleep(BETWEEN_S)
        stats = await stop_server(served)
    finally:
        shutil.rmtree(workspace.parent, ignore_errors=True)
    return {
        "repo": repo.name,
        "url": repo.url,
        "sha": repo.sha,
        "language": repo.language,
        "unseen": repo.unseen,
        "server_home": served.home,
        "load_s": round(load_s, 1),
        "summary": summarize(results),
        "server": stats.get("server", {}),
        "emptyReasons": stats.get("emptyReasons", {}),
        "prefill": {k: stats["prefill"][k] for k in ("runs", "interruptions")},
        "prefill_ready": stats["prefill"]["ready"],
        "index": stats.get("index", {}),
        "asks": [asdict(r) for r in results],
    }


def summarize(results: list[AskResult]) -> dict[str, Any]:
    n = len(results)
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    exact = sum(r.exact for r in results)
    return {
        "asks": n,
        "exact": exact,
        "exact_pct": round(100 * exact / n, 1) if n else None,
        "edit_sim": round(100 * sum(r.similarity for r in results) / n, 1) if n else None,
        "shown": sum(bool(r.answer) for r in results),
        "cold": sum(r.cold for r in results),
        "failed": sum(r.failed for r in results),
        "p50_ms": percentile(latencies, 0.5),
        "p95_ms": percentile(latencies, 0.95),
        "prefill_runs": sum(r.prefill_runs for r in results),
        "prefill_interruptions": sum(r.prefill_interruptions for r in results),
        "with_ready_record": sum(r.ready_s is not None for r in results),
    }


def grouped(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per repository ('*': kept unseen), the ones tuned on, and all, from the repos' results."""
    asks = {r["repo"]: [AskResult(**a) for a in r["asks"]] for r in rows}
    out = {(f"{r['repo']} *" if r["unseen"] else r["repo"]): r["summary"] for r in rows}
    tuned = [a for r in rows if not r["unseen"] for a in asks[r["repo"]]]
    if len(rows) > 1 and tuned and len(tuned) < sum(map(len, asks.values())):
        out["tuned on (not *)"] = summarize(tuned)
    if len(rows) > 1:
        out["all"] = summarize([a for r in rows for a in asks[r["repo"]]])
    return out


def print_asks(title: str, groups: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}\n")
    width = max(12, *map(len, groups))
    print(
        f"{'repository':<{width}} {'asks':>5} {'exact %':>8} {'edit sim':>9} {'shown':>6} "
        f"{'cold':>5} {'p50 ms':>8} {'p95 ms':>8} {'prefills':>9} {'interr.':>8} {'ready':>6}"
    )
    for name, s in groups.items():
        print(
            f"{name:<{width}} {s['asks']:>5} {s['exact_pct']!s:>8} {s['edit_sim']!s:>9} "
            f"{s['shown']:>6} {s['cold']:>5} {s['p50_ms']!s:>8} {s['p95_ms']!s:>8} "
            f"{s['prefill_runs']:>9} {s['prefill_interruptions']:>8} {s['with_ready_record']:>6}"
        )
    print(
        "* kept unseen while tuning. cold: asks answered from the short cold prompt; prefills/"
        "interr.: prefill runs and interruptions during the asks; ready: asks whose document "
        "got its whole prompt cached before the answer (`ready_s` per ask)"
    )


def suffix(args: argparse.Namespace) -> str:
    fresh = "_fresh" if getattr(args, "fresh", False) else ""
    return ("_nofocus" if args.no_focus else "") + ("_single" if args.single_files else "") + fresh


def cmd_asks(args: argparse.Namespace) -> int:
    repos, by_repo = all_positions(args)
    roots = checkouts(repos)
    settings = json.loads(args.settings) if args.settings else {}
    rows = []
    for repo in repos:
        started = time.perf_counter()
        done = ask_repo(
            repo,
            roots[repo.name],
            by_repo[repo.name],
            settings,
            args.rest_s,
            not args.no_focus,
            not args.single_files,
            args.fresh,
        )
        rows.append(asyncio.run(done))
        print(f"done: {repo.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    how = "single files" if args.single_files else "rooted at the repository"
    how += ", no didFocus" if args.no_focus else ", didFocus after 150 ms"
    how += ", a server started with the editor per position" if args.fresh else ""
    groups = grouped(rows)
    print_asks(f"asks after a {args.rest_s:g} s rest ({how})", groups)
    payload = {
        "mode": {
            "rooted": not args.single_files,
            "did_focus": not args.no_focus,
            "fresh": args.fresh,
        },
        "model": os.environ.get("FASTCOMPLETE_MODEL") or "(default)",
        "settings": settings,
        "n": args.n,
        "seed": args.seed,
        "per_file": args.per_file,
        "rest_s": args.rest_s,
        "summary": groups,
        "repos": rows,
    }
    path = args.json or RESULTS / f"unseen_asks{suffix(args)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"written to {path}")
    if args.ceiling:
        return run_ceiling(args, repos, by_repo, payload)
    return 0


# -- the ceiling, side by side -----------------------------------------------------------------


def cmd_ceiling(args: argparse.Namespace) -> int:
    product = None
    if args.asks:
        product = json.loads(Path(args.asks).read_text())
        # The product's own positions: its run's n, seed and per-file, its repositories.
        args.n, args.seed, args.per_file = product["n"], product["seed"], product["per_file"]
        args.repos = ",".join(r["repo"] for r in product["repos"])
    repos, by_repo = all_positions(args)
    return run_ceiling(args, repos, by_repo, product)


def run_ceiling(
    args: argparse.Namespace,
    repos: list[UnseenRepo],
    by_repo: dict[str, list[Position]],
    product: dict[str, Any] | None,
) -> int:
    from bench.fim_ceiling import load_ceiling

    roots = checkouts(repos)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    answer = load_ceiling(variants)
    asks = {a["key"]: a for r in (product or {}).get("repos", []) for a in r["asks"]}
    rows = []
    for repo in repos:
        for pos in by_repo[repo.name]:
            case = pos.case(roots[repo.name])
            row: dict[str, Any] = pos.brief()
            row["ceiling"] = {}
            for variant in variants:
                text = answer(variant, case)
                exact, sim = scored(text, pos.expected)
                row["ceiling"][variant] = {
                    "answer": text,
                    "exact": exact,
                    "similarity": round(sim, 3),
                }
            if (ask := asks.get(pos.key)) is not None:
                if ask["expected"] != pos.expected:
                    raise SystemExit(f"{pos.key}: the asks file was cut differently")
                row["product"] = {
                    k: ask[k] for k in ("answer", "exact", "similarity", "cold", "latency_ms")
                }
            rows.append(row)
    if product is not None and (missing := set(asks) - {r["key"] for r in rows}):
        raise SystemExit(f"positions of the asks file not found here: {sorted(missing)[:3]}")
    print_side_by_side(rows, variants, repos)
    path = args.side_json or RESULTS / "unseen_side_by_side.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"n": args.n, "seed": args.seed, "per_file": args.per_file, "variants": variants}
    if product is not None:
        meta["product"] = {k: product[k] for k in ("mode", "model", "settings", "rest_s")}
    path.write_text(json.dumps({**meta, "positions": rows}, indent=2))
    print(f"written to {path}")
    return 0


def print_side_by_side(
    rows: list[dict[str, Any]], variants: list[str], repos: list[UnseenRepo]
) -> None:
    print("\nthe same positions: the product (after a rest) beside the plain healed FIM prompt\n")
    head = f"{'repository':<24} {'n':>3} {'product':>8}"
    head += "".join(f" {'ceil. ' + v:>14}" for v in variants)
    head += f" {'both':>5} {'prod only':>10} {'ceil only':>10} {'(cold)':>7} {'neither':>8}"
    print(head)
    names = [(f"{r.name} *" if r.unseen else r.name, [r.name]) for r in repos]
    if len(repos) > 1:
        names.append(("all", [r.name for r in repos]))
    ref = variants[0]
    for label, members in names:
        group = [r for r in rows if r["repo"] in members]
        n = len(group)
        has = [r for r in group if "product" in r]
        prod = f"{100 * sum(r['product']['exact'] for r in has) / len(has):.1f}" if has else "-"
        line = f"{label:<24} {n:>3} {prod:>8}"
        for v in variants:
            line += f" {100 * sum(r['ceiling'][v]['exact'] for r in group) / max(n, 1):>14.1f}"
        if has:
            p = [r["product"]["exact"] for r in has]
            c = [r["ceiling"][ref]["exact"] for r in has]
            cold_lost = sum(
                r["product"]["cold"] for r, a, b in zip(has, p, c, strict=True) if b and not a
            )
            line += (
                f" {sum(a and b for a, b in zip(p, c, strict=True)):>5}"
                f" {sum(a and not b for a, b in zip(p, c, strict=True)):>10}"
                f" {sum(b and not a for a, b in zip(p, c, strict=True)):>10}"
                f" {cold_lost:>7} {sum(not a and not b for a, b in zip(p, c, strict=True)):>8}"
            )
        print(line)
    print(
        f"exact %; both/prod only/ceil only/neither count positions against the {ref} ceiling; "
        "(cold): of 'ceil only', those the product answered from the short cold prompt. "
        "* kept unseen while tuning"
    )


# -- keystrokes saved --------------------------------------------------------------------------


def cmd_keys(args: argparse.Namespace) -> int:
    from bench import assist

    repos = pick(args.repos)
    roots = checkouts(repos)
    settings = {**assist.CONFIGS["fast"], **(json.loads(args.settings) if args.settings else {})}
    rows = []
    for repo in repos:
        root = roots[repo.name]
        cases = assist.regions(
            args.regions, args.seed, args.max_chars, root, languages={repo.language}
        )
        started = time.perf_counter()
        workspace = None if args.single_files else root
        done = assist.run_config(
            repo.name, settings, cases, args.seed, not args.no_focus, workspace=workspace
        )
        result = asyncio.run(done)
        result.update(repo=repo.name, sha=repo.sha, unseen=repo.unseen, language=repo.language)
        rows.append(result)
        print(f"done: {repo.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    how = "single files" if args.single_files else "rooted at the repository"
    print(f"\nkeystrokes saved ({how}; a simulated typist, exact suggestions taken with Tab)\n")
    head = f"{'repository':<24} {'regions':>7} {'baseline':>8} {'used':>6} {'saved':>7}"
    head += f" {'shown':>6} {'acc.':>5} {'acc/shown':>9} {'answered':>8} {'late':>5} {'p50 ms':>7}"
    print(head)
    groups = [(f"{r['repo']} *" if r["unseen"] else r["repo"], [r]) for r in rows]
    tuned = [r for r in rows if not r["unseen"]]
    if len(rows) > 1 and 0 < len(tuned) < len(rows):
        groups.append(("tuned on (not *)", tuned))
    if len(rows) > 1:
        groups.append(("all", rows))
    summary = {}
    for label, members in groups:
        total = {
            k: sum(m[k] for m in members)
            for k in ("baseline_keys", "used_keys", "shown", "accepted", "answered")
        }
        total["answered_late"] = sum(m["answered_late"] for m in members)
        total["regions"] = sum(len(m["regions"]) for m in members)
        base = total["baseline_keys"]
        total["saved_share"] = round(1 - total["used_keys"] / base, 3) if base else None
        shown = total["shown"]
        total["accepted_share"] = round(total["accepted"] / shown, 3) if shown else None
        summary[label] = total
        p50 = members[0]["latency_p50_ms"] if len(members) == 1 else "-"
        saved = f"{100 * total['saved_share']:.1f}%" if total["saved_share"] is not None else "-"
        print(
            f"{label:<24} {total['regions']:>7} {base:>8} {total['used_keys']:>6} {saved:>7} "
            f"{shown:>6} {total['accepted']:>5} {total['accepted_share']!s:>9} "
            f"{total['answered']:>8} {total['answered_late']:>5} {p50!s:>7}"
        )
    print("* kept unseen while tuning. late: answers with a suggestion after the next key")
    payload = {
        "mode": {"rooted": not args.single_files, "did_focus": not args.no_focus},
        "model": os.environ.get("FASTCOMPLETE_MODEL") or "(default)",
        "settings": settings,
        "regions": args.regions,
        "seed": args.seed,
        "summary": summary,
        "repos": rows,
    }
    path = args.json or RESULTS / f"unseen_keys{suffix(args)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))
    print(f"written to {path}")
    return 0


def cmd_positions(args: argparse.Namespace) -> int:
    _, by_repo = all_positions(args)
    for positions in by_repo.values():
        for p in positions:
            print(f"{p.key}\t{p.before_cursor.strip()!r} -> {p.expected!r}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repos", help="comma-separated names (default: all three)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument(
            "--settings", help="server settings as JSON, e.g. '{\"workspaceIndex\": false}'"
        )

    def placed(p: argparse.ArgumentParser) -> None:
        p.add_argument("--n", type=int, default=20, help="positions per repository")
        p.add_argument("--per-file", type=int, default=PER_FILE, help="most positions per file")

    def ceiling_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--variants", default="fast", help="the ceiling's model variants: fast, standard"
        )
        p.add_argument(
            "--side-json", type=Path, help="default bench/results/unseen_side_by_side.json"
        )

    asks = sub.add_parser("asks", help="asks after a rest, through the server")
    common(asks)
    placed(asks)
    ceiling_opts(asks)
    asks.add_argument("--rest-s", type=float, default=REST_S)
    asks.add_argument("--no-focus", action="store_true", help="a client without didFocus")
    asks.add_argument("--single-files", action="store_true", help="no workspace folder")
    asks.add_argument(
        "--fresh", action="store_true", help="a server started with the editor per position"
    )
    asks.add_argument("--ceiling", action="store_true", help="then the ceiling, side by side")
    asks.add_argument("--json", type=Path)
    asks.set_defaults(run=cmd_asks)

    ceiling = sub.add_parser("ceiling", help="the plain healed FIM prompt on the same positions")
    common(ceiling)
    placed(ceiling)
    ceiling_opts(ceiling)
    ceiling.add_argument("--asks", type=Path, help="an asks JSON: its positions, side by side")
    ceiling.set_defaults(run=cmd_ceiling)

    keys = sub.add_parser("keys", help="keystrokes saved by a simulated typist")
    common(keys)
    keys.add_argument("--regions", type=int, default=6, help="regions per repository")
    keys.add_argument("--max-chars", type=int, default=300)
    keys.add_argument("--no-focus", action="store_true")
    keys.add_argument("--single-files", action="store_true")
    keys.add_argument("--json", type=Path)
    keys.set_defaults(run=cmd_keys)

    positions = sub.add_parser("positions", help="print the positions")
    common(positions)
    placed(positions)
    positions.set_defaults(run=cmd_positions)

    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
