"""Keystrokes saved by suggestions: a simulated person types real code with the server's help.

    FASTCOMPLETE_HOME=/tmp/fchome .venv/bin/python bench/assist.py [--regions 12] [--quick]

Regions (seeded) are 3-6 consecutive code lines of real Python files, half from this project
(which no model saw in training), half from the standard library. Each file is opened without
its region, the rest below kept, the cursor where the region starts (its first line's
indentation stays in the document). The person types the region one key at a time with human
gaps planned up front (log-normal, median ~135 ms, plus 0.3-0.9 s after a newline; the person
does not wait for the server). "\\n" and the next line's indentation are one key (auto-indent).
Per key the client does what VS Code does: didChange, $/cancelRequest for the previous unanswered
inline request, an automatic inline-completion request at the new cursor, and
fastcomplete/didFocus when the cursor has rested 150 ms (`--no-focus`: never, as a plain LSP
client such as Neovim's built-in one does; `--focus-both`: each configuration both ways).

A suggestion counts when its answer arrives before the next key is due. When it is exactly what
comes next (or, for a multi-line one, its first line is exactly the rest of the line) the person
accepts it instead of that key: one keystroke (Tab), one didChange inserting it, the item's
command run (full accepts, as VS Code does), and a new request at once. Anything else is ignored.

Configurations, each on a fresh `fastcomplete serve` with an empty completion cache: "fast"
(fastMode, coldContext/typeThrough/prefetch on), "fast, items 2-4 off" (those three off) and
"standard" (fastMode off), and one feature off at a time ("fast without known names", "... recent
edits", "... the gate"; "fast with the gate observing" labels without holding back, for
bench/gate_seed.py). `--files DIR` types regions of DIR's Python files instead, single files.
`--workspace DIR` types regions of DIR's files in any language the server knows (`--languages`
narrows them; files with "test" in their name left out) with the server rooted at DIR, as an
editor with that folder open: at a copy of DIR without the regions' files, so that no region can
reach the prompt through the workspace index (bench/unseen.py uses this on repositories no model
has seen). Results go to bench/results/assist.json.
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
import re
import shutil
import sysconfig
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.lsp_replay import (
    Asked,
    Served,
    ask_inline,
    cancel,
    code_mask,
    did_close,
    did_focus,
    did_insert,
    did_open,
    end_position,
    human_gaps,
    percentile,
    start_server,
    stop_server,
)
from bench.unseen_repos import held_out_copy, source_files
from lsp_server.text.languages import EXTENSIONS

ROOT = Path(__file__).resolve().parent.parent
STDLIB_FILES = (
    "textwrap.py",
    "argparse.py",
    "json/decoder.py",
    "shutil.py",
    "csv.py",
    "dataclasses.py",
    "functools.py",
    "ast.py",
)
SKIP_HEAD = 0.15  # imports and module docstrings are not what people type with help
FOCUS_AFTER_S = 0.15  # VS Code tells the server where the cursor rests after this long
OPEN_S = 2.0  # an editor is open a moment before the first key
BETWEEN_S = 1.0
CONFIGS: dict[str, dict[str, Any]] = {
    "fast": {"fastMode": True},
    "fast, items 2-4 off": {
        "fastMode": True,
        "coldContext": False,
        "typeThrough": False,
        "prefetch": False,
    },
    "standard": {"fastMode": False},
    "fast without known names": {"fastMode": True, "knownNames": False},
    "fast without recent edits": {"fastMode": True, "recentEdits": False},
    "fast without the gate": {"fastMode": True, "showGate": False},
    # The gate labels every suggestion but holds none back: what it learns from (its file is
    # left in the server's home; bench/gate_seed.py fits the seed weights from it).
    "fast with the gate observing": {"fastMode": True, "showGateThreshold": 0.0},
}
NEWLINE_KEY = re.compile(r"\n[ \t]*")


@dataclass(frozen=True)
class Region:
    path: str  # for the report; relative to the folder the regions come from, if one was given
    line: int  # the region's first line (0-based)
    before: str  # the document up to the cursor: the first line's indentation included
    typed: str  # what the person types
    after: str  # the rest of the file, from the newline that ends the region
    language: str = "python"  # the LSP language id


@dataclass
class Shown:
    """A suggestion on screen when a key was due, and what the person did with it."""

    offset: int  # characters of the region typed when it was shown
    text: str
    accepted: str  # what was accepted ("" for nothing)
    expected: str  # the region's next characters, for the report
    doubled_space: bool  # it starts with a space right after one before the cursor


@dataclass
class Replay:
    path: str
    line: int
    baseline: int  # keys to type the region without help
    typed_keys: int = 0
    accept_keys: int = 0
    requests: int = 0
    answered: int = 0  # requests with a suggestion, in time or not
    late: int = 0  # ...that arrived after the next key was due
    latencies_ms: list[float] = field(default_factory=list)
    shown: list[Shown] = field(default_factory=list)

    @property
    def used(self) -> int:
        return self.typed_keys + self.accept_keys


def next_key(rest: str, line_so_far: str) -> str:
    """The next key's text: a newline with the next line's indentation (auto-indent), the
    indentation of a line started by an accept (one Tab), or one character."""
    if rest.startswith("\n"):
        return NEWLINE_KEY.match(rest).group()  # type: ignore[union-attr]
    if not line_so_far.strip() and rest[0] in " \t":
        return rest[: len(rest) - len(rest.lstrip(" \t"))]
    return rest[0]


def baseline_keys(region: Region) -> int:
    done, keys = 0, 0
    while done < len(region.typed):
        line_so_far = (region.before + region.typed[:done]).rsplit("\n", 1)[-1]
        done += len(next_key(region.typed[done:], line_so_far))
        keys += 1
    return keys


def acceptable(suggestion: str, rest: str) -> str:
    """What the person accepts of `suggestion` when `rest` is what they are about to type: all
    of it when it is exactly what comes next, its first line when that is exactly the rest of
    the line; otherwise nothing."""
    if not suggestion:
        return ""
    if rest.startswith(suggestion):
        return suggestion
    first = suggestion.split("\n", 1)[0]
    if "\n" in suggestion and first and first == rest.split("\n", 1)[0]:
        return first
    return ""


def gaps(typed: str, seed: int) -> list[float]:
    """The pause before each character's key, as bench/typing_replay.py plans it; an accept takes
    the place (and the time) of the key that was due."""
    return human_gaps(typed, seed)


def python_files(folder: Path | None = None) -> tuple[list[Path], list[Path]]:
    """This project's and the standard library's files, or `folder`'s (both halves)."""
    if folder is not None:
        mine = sorted(p for p in folder.rglob("*.py") if p.name != "__init__.py")
        return mine, mine
    project = [
        p
        for folder in ("lsp_server", "inference")
        for p in sorted((ROOT / folder).glob("*.py"))
        if p.name != "__init__.py"
    ]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return project, [stdlib / n for n in STDLIB_FILES if (stdlib / n).exists()]


def pick_region(
    path: Path, rng: random.Random, max_chars: int, base: Path | None = None
) -> Region | None:
    """A region of `path`; its path relative to `base` when given (else to this project)."""
    language = EXTENSIONS.get(path.suffix, "python")
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    lines = [line.rstrip() for line in text.split("\n")]
    mask = code_mask(lines, language)
    size = rng.randint(3, 6)
    starts = [
        a
        for a in range(int(SKIP_HEAD * len(lines)), len(lines) - size)
        if all(mask[a : a + size])
        and 40 <= sum(len(r.strip()) + 1 for r in lines[a : a + size]) <= max_chars
    ]
    if not starts:
        return None
    a = rng.choice(starts)
    first = lines[a]
    indent = first[: len(first) - len(first.lstrip())]
    before = "\n".join(lines[:a]) + "\n" + indent
    typed = "\n".join([first.lstrip(), *lines[a + 1 : a + size]])
    after = "\n" + "\n".join(lines[a + size :])
    try:
        shown_path = path.relative_to(base).as_posix() if base else str(path.relative_to(ROOT))
    except ValueError:
        shown_path = str(path)
    return Region(shown_path, a, before, typed, after, language)


def regions(
    count: int,
    seed: int,
    max_chars: int,
    folder: Path | None = None,
    languages: set[str] | None = None,
) -> list[Region]:
    """`count` regions, alternating project and standard-library files (half each), or all from
    `folder`'s files: its Python files, or with `languages` its files of those languages as the
    workspace index reads them (paths then relative to `folder`)."""
    rng = random.Random(seed)
    base = None
    if folder is not None and languages:
        project = stdlib = source_files(folder, languages)
        base = folder
    else:
        project, stdlib = python_files(folder)
    picked: list[Region] = []
    seen: set[tuple[str, int]] = set()
    tries = 0
    while len(picked) < count and tries < 100 * count:
        tries += 1
        files = project if len(picked) % 2 == 0 or not stdlib else stdlib
        region = pick_region(rng.choice(files), rng, max_chars, base)
        if region is not None and (region.path, region.line) not in seen:
            seen.add((region.path, region.line))
            picked.append(region)
    return picked


async def sleep_until(t: float) -> None:
    await asyncio.sleep(max(0.0, t - time.perf_counter()))


async def replay(
    served: Served,
    region: Region,
    index: int,
    seed: int,
    focus: bool = True,
    workspace: Path | None = None,
) -> Replay:
    """`workspace`: the folder the server is rooted at; the region's file is opened at its path
    there (`region.path` is relative to it). Without, under a uri of its own per region."""
    client = served.client
    name = Path(region.path)
    if workspace is not None:
        uri = (workspace / region.path).as_uri()
    else:
        uri = f"file:///bench/assist/{index}/{name.parent.name}/{name.name}"
    typed, planned = region.typed, gaps(region.typed, seed + index)
    out = Replay(region.path, region.line, baseline_keys(region))
    did_open(client, uri, region.language, region.before + region.after)
    if focus:
        did_focus(client, uri, end_position(region.before))  # VS Code: at once when it opens
    await asyncio.sleep(OPEN_S)
    asked: list[Asked] = []
    commands: list[asyncio.Task] = []
    version, done = 1, 0
    due = time.perf_counter() + planned[0]
    while done < len(typed):
        await sleep_until(due)
        prefix = region.before + typed[:done]
        rest = typed[done:]
        last = asked[-1] if asked else None
        on_screen = last is not None and last.arrived is not None and last.arrived <= due
        suggestion = last.shown if on_screen and last is not None else ""
        take = acceptable(suggestion, rest)
        if suggestion:
            doubled = suggestion[:1] in (" ", "\t") and prefix[-1:] in (" ", "\t")
            expected = rest[: len(suggestion) + 10]
            out.shown.append(Shown(done, suggestion, take, expected, doubled))
        version += 1
        if take:
            # Tab instead of the key that was due: the accepted text in one edit, the item's
            # command as VS Code runs it on a full accept, and VS Code's re-trigger at once.
            did_insert(client, uri, version, end_position(prefix), take)
            out.accept_keys += 1
            item = last.items[0] if last is not None else None
            if take == suggestion and item is not None and item.command is not None:
                cmd = item.command
                commands.append(
                    asyncio.create_task(client.command(cmd.command, *(cmd.arguments or [])))
                )
            done += len(take)
        else:
            key = next_key(rest, prefix.rsplit("\n", 1)[-1])
            did_insert(client, uri, version, end_position(prefix), key)
            out.typed_keys += 1
            if last is not None and last.arrived is None:
                cancel(client, last.msg_id)
            done += len(key)
        cursor = end_position(region.before + typed[:done])
        asked.append(ask_inline(client, uri, cursor, f"assist-{index}-{len(asked)}"))
        if done >= len(typed):
            break
        gap = planned[done]
        if focus and gap > FOCUS_AFTER_S:
            await sleep_until(due + FOCUS_AFTER_S)
            did_focus(client, uri, cursor)  # the cursor rested
        due += gap
    with contextlib.suppress(Exception):  # error answers (cancelled) are recorded on Asked
        await asyncio.wait_for(
            asyncio.gather(*(a.future for a in asked), *commands, return_exceptions=True), 60
        )
    for i, a in enumerate(asked):
        out.requests += 1
        if a.items:
            out.answered += 1
            out.latencies_ms.append(round(a.latency_ms or 0.0, 1))
            # in time: before the next request went out (the next key or accept)
            nxt = asked[i + 1].sent if i + 1 < len(asked) else None
            out.late += nxt is not None and a.arrived is not None and a.arrived > nxt
    did_close(client, uri)
    await asyncio.sleep(BETWEEN_S)
    return out


async def run_config(
    label: str,
    settings: dict[str, Any],
    cases: list[Region],
    seed: int,
    focus: bool = True,
    workspace: Path | None = None,
) -> dict[str, Any]:
    """`workspace`: the folder the regions come from (their paths relative to it); the server is
    rooted at a copy of it without the regions' files."""
    root = held_out_copy(workspace, {r.path for r in cases}) if workspace is not None else None
    try:
        served = await start_server(settings, "assist", root)
        replays = [
            await replay(served, region, i, seed, focus, root) for i, region in enumerate(cases)
        ]
        stats = await stop_server(served)
    finally:
        if root is not None:
            shutil.rmtree(root.parent, ignore_errors=True)
    baseline = sum(r.baseline for r in replays)
    used = sum(r.used for r in replays)
    shown = sum(len(r.shown) for r in replays)
    accepted = sum(r.accept_keys for r in replays)
    latencies = [ms for r in replays for ms in r.latencies_ms]
    server = stats.get("server", {})
    return {
        "config": label,
        "settings": settings,
        "focus": focus,
        "workspace": str(workspace) if workspace is not None else None,
        "server_home": served.home,
        "baseline_keys": baseline,
        "used_keys": used,
        "typed_keys": sum(r.typed_keys for r in replays),
        "saved_share": round(1 - used / baseline, 3) if baseline else None,
        "shown": shown,
        "accepted": accepted,
        "accepted_share": round(accepted / shown, 3) if shown else None,
        "held_back": server.get("held_back", 0),  # by the show gate
        "gate": stats.get("gate", {}),
        "requests": sum(r.requests for r in replays),
        "answered": sum(r.answered for r in replays),
        "answered_late": sum(r.late for r in replays),
        "doubled_space": sum(s.doubled_space for r in replays for s in r.shown),
        "latency_p50_ms": percentile(latencies, 0.5),
        "latency_p95_ms": percentile(latencies, 0.95),
        "server": server,
        "emptyReasons": stats.get("emptyReasons", {}),
        "models": stats.get("models", {}),  # TTFT, prompt and reused tokens per model
        "events": stats.get("events", {}),  # the engine's: warmups, warmup_tokens, ...
        "regions": [
            {**asdict(r), "used": r.used, "shown": [asdict(s) for s in r.shown]} for r in replays
        ],
    }


COLUMNS = (
    ("baseline", "baseline_keys"),
    ("used", "used_keys"),
    ("saved", "saved_share"),
    ("shown", "shown"),
    ("accepted", "accepted"),
    ("acc/shown", "accepted_share"),
    ("held back", "held_back"),
    ("p50 ms", "latency_p50_ms"),
    ("p95 ms", "latency_p95_ms"),
)
COUNTERS = ("type_through", "prefetch_hits", "prefetched", "short_context", "stale_dropped")
# Seen at the client: suggestions that came after the next key, and ones starting with a space
# right after a space.
LOCAL = ("answered_late", "doubled_space")


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regions", type=int, default=12)
    parser.add_argument(
        "--max-chars", type=int, default=300, help="most characters in a region, indentation aside"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 short regions, fast and ablated"
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--files", type=Path, help="pick the regions from this folder's Python files instead"
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        help="pick the regions from this folder's files, the server rooted at (a copy of) it",
    )
    parser.add_argument(
        "--languages",
        help="with --workspace: comma-separated language ids (default: every one the server knows)",
    )
    parser.add_argument(
        "--configs", help=f"comma-separated, of: {', '.join(CONFIGS)} (default: all)"
    )
    parser.add_argument(
        "--no-focus",
        action="store_true",
        help="send no fastcomplete/didFocus (a plain LSP client: only didOpen, didChange, asks)",
    )
    parser.add_argument(
        "--focus-both", action="store_true", help="each config with and without didFocus"
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/assist.json"))
    args = parser.parse_args()
    count, max_chars = (2, 120) if args.quick else (args.regions, args.max_chars)
    labels = list(CONFIGS)[:2] if args.quick else list(CONFIGS)
    if args.configs:
        labels = [c.strip() for c in args.configs.split(",")]
        unknown = [c for c in labels if c not in CONFIGS]
        if unknown:
            parser.error(f"unknown config(s) {unknown}: choose from {list(CONFIGS)}")
    if args.files and args.workspace:
        parser.error("--files or --workspace, not both")
    workspace = args.workspace.resolve() if args.workspace else None
    if workspace is not None:
        known = set(EXTENSIONS.values())
        languages = set(args.languages.split(",")) if args.languages else known
        cases = regions(count, args.seed, max_chars, workspace, languages)
    else:
        cases = regions(count, args.seed, max_chars, args.files)
    chars = sum(len(c.typed) for c in cases)
    print(f"{len(cases)} regions, {chars} characters", file=sys.stderr)
    results = []
    focuses = [True, False] if args.focus_both else [not args.no_focus]
    for focus in focuses:
        for label in labels:
            started = time.perf_counter()
            row = label if focus else f"{label}, no didFocus"
            config = CONFIGS[label]
            done = run_config(row, config, cases, args.seed, focus, workspace)
            results.append(asyncio.run(done))
            print(f"done: {row} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    print("\nkeystrokes saved: a person types real code, accepting exact suggestions (Tab)")
    print("(p50/p95: client latency of the requests answered with a suggestion)\n")
    width = max(len(r["config"]) for r in results)
    print(f"{'config':<{width}} " + " ".join(f"{head:>9}" for head, _ in COLUMNS))
    for r in results:
        cells = []
        for head, key in COLUMNS:
            value = r[key]
            cells.append(f"{value:.1%}" if head == "saved" and value is not None else str(value))
        print(f"{r['config']:<{width}} " + " ".join(f"{c:>9}" for c in cells))
    print()
    for r in results:
        counts = ", ".join(f"{k} {r['server'].get(k, 0)}" for k in COUNTERS)
        counts += "".join(f", {k} {r[k]}" for k in LOCAL)
        reasons = ", ".join(f"{k} {n}" for k, n in sorted(r["emptyReasons"].items()))
        print(f"{r['config']}: {counts}; empty: {reasons or 'none'}")
    by = {r["config"]: r["saved_share"] for r in results}
    if "fast" in by and len(labels) > 1:
        print(f"\nkeystrokes saved, fast / items 2-4 off: {ratio(by['fast'], by.get(labels[1]))}")
    if "standard" in by and "fast" in by:
        print(f"keystrokes saved, fast / standard: {ratio(by['fast'], by['standard'])}")
    if "fast, no didFocus" in by and "fast" in by:
        plain = ratio(by["fast, no didFocus"], by["fast"])
        print(f"keystrokes saved, no didFocus / with it (fast): {plain}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"regions": len(cases), "seed": args.seed, "configs": results}
    args.json.write_text(json.dumps(payload, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
