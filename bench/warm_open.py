"""A just-opened file, the cursor resting: is the whole prompt ready when the person asks, and how
long did the server take to get it there against what the engine alone needs for that prompt?

    FASTCOMPLETE_MODEL=qwen2.5-coder-0.5b .venv/bin/python -m bench.warm_open \\
        [--positions 20] [--rest-ms 2000,4000] [--repos DIR,DIR]

Positions are `fastcomplete eval --workspace`'s (a real line cut, its rest deleted), one per file so
that no position's file was seen before, from the eval repositories (`bench/eval_repos.sh`: MCP
Python, MCP TypeScript) and, when it is there, this project at ca1da2e
(`$FASTCOMPLETE_HOME/eval-repos/fastcomplete-ca1da2e`). Each repository gets a fresh `fastcomplete
serve` with it as the workspace (indexed before the first position). Per position: didOpen,
`fastcomplete/didFocus` at the cursor 150 ms later (as the VS Code extension sends it), the cursor
rests, then one automatic inline request; then didClose and a second of quiet.

Printed per rest: exact match, edit similarity, how many answers came from the short cold prompt
(`short_context`), latency, and the server's time from didFocus to the whole prompt cached
(`prefill.ready` in `fastcomplete.stats`) beside the engine's own prefill of the same prompt (the
prompt the server reports at that place, prefilled from an empty KV cache in this process after
the servers stopped): their ratio is what the background prefill costs over the engine.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_replay import (
    ask_inline,
    did_close,
    did_focus,
    did_open,
    percentile,
    start_server,
    stop_server,
)
from inference.paths import fastcomplete_home
from lsp_server.cli.evaluation import Case, edit_similarity, workspace_cases
from lsp_server.workspace.exclusions import Exclusions

FOCUS_AFTER_OPEN_S = 0.15
BETWEEN_S = 1.0
INDEX_TIMEOUT_S = 300.0
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    repo: str
    path: str
    line: int
    character: int
    expected: str
    shown: str
    exact: bool
    similarity: float
    short: bool  # answered (or not) from the short cold prompt
    latency_ms: float | None
    ready_s: float | None  # didFocus -> whole prompt cached (None: not by the ask)
    prefill: dict[str, Any] | None  # the server's record of that prefill
    prompt: str  # the whole prompt at the cursor, as the server plans it


def default_repos() -> list[Path]:
    out = subprocess.run(
        ["bash", str(ROOT / "bench/eval_repos.sh")], capture_output=True, text=True, check=True
    )
    repos = [Path(line) for line in out.stdout.split()]
    own = fastcomplete_home() / "eval-repos" / "fastcomplete-ca1da2e"
    return [*repos, own] if own.is_dir() else repos


def one_per_file(root: Path, n: int, seed: int) -> list[Case]:
    seen: set[str] = set()
    cases = []
    for case in workspace_cases(root, 8 * n, seed, Exclusions(root)):
        if case.path not in seen:
            seen.add(case.path)
            cases.append(case)
    return cases[:n]


async def run_repo(
    root: Path, cases: list[Case], rest_s: float, fresh: bool, reopen_s: float | None = None
) -> tuple[list[Outcome], list[Outcome]]:
    """`fresh`: a server started for each position, which opens its file at once (a person
    opening the editor on a file while the models load), else one server for the repository,
    its index built before the first position. `reopen_s`: then each file is opened again
    (every other one opened since), and asked this long after its focus."""
    outcomes: list[Outcome] = []
    if fresh:
        for i, case in enumerate(cases):
            served = await start_server({}, "warm-open", workspace=root, wait=False)
            try:
                outcomes.append(await one_position(served.client, root, case, i, rest_s))
            finally:
                await stop_server(served)
        return outcomes, []
    served = await start_server({}, "warm-open", workspace=root)
    client = served.client
    deadline = time.perf_counter() + INDEX_TIMEOUT_S
    while (await client.command("fastcomplete.stats"))["index"]["state"] == "building":
        if time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.5)
    reopened: list[Outcome] = []
    try:
        for i, case in enumerate(cases):
            outcomes.append(await one_position(client, root, case, i, rest_s))
        if reopen_s is not None:
            for i, case in enumerate(cases):
                reopened.append(await one_position(client, root, case, i + len(cases), reopen_s))
    finally:
        await stop_server(served)
    return outcomes, reopened


def _new_records(after: dict[str, Any], before: list[dict[str, Any]], uri: str) -> list[dict]:
    return [r for r in after["prefill"]["ready"] if r["uri"] == uri and r not in before]


async def one_position(client: Any, root: Path, case: Case, i: int, rest_s: float) -> Outcome:
    before = await client.command("fastcomplete.stats")
    earlier = before.get("prefill", {}).get("ready", [])
    uri = Path(case.path).resolve().as_uri()
    at = types.Position(case.line, case.character)
    did_open(client, uri, case.language, case.document)
    await asyncio.sleep(FOCUS_AFTER_OPEN_S)
    focused = time.perf_counter()
    did_focus(client, uri, at)
    await asyncio.sleep(rest_s)
    asked = ask_inline(client, uri, at, f"warm-open-{i}")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(asked.future), timeout=60)
    await asyncio.sleep(0)
    after = await client.command("fastcomplete.stats")
    records = [r for r in _new_records(after, earlier, uri) if r["line"] == case.line]
    # Only a prefill that ended before the ask counts as ready for it.
    ready_s = records[0]["ready_s"] if records else None
    if ready_s is not None and ready_s > asked.sent - focused:
        ready_s = None
    debug = await client.command(
        "fastcomplete.debugDocument",
        {"uri": uri, "position": {"line": case.line, "character": case.character}},
    )
    did_close(client, uri)
    await asyncio.sleep(BETWEEN_S)
    if not records:  # the prefill's record may land after the ask
        late = await client.command("fastcomplete.stats")
        records = _new_records(late, earlier, uri)
    shown = asked.shown
    short = after["server"].get("short_context", 0) > before["server"].get("short_context", 0)
    return Outcome(
        root.name,
        str(Path(case.path).relative_to(root)),
        case.line,
        case.character,
        case.expected,
        shown,
        shown.rstrip() == case.expected.rstrip() and bool(case.expected.strip()),
        round(edit_similarity(shown, case.expected), 3),
        short,
        asked.latency_ms and round(asked.latency_ms, 1),
        ready_s,
        records[0] if records else None,
        debug.get("prompt", ""),
    )


def engine_prefill_s(prompts: list[str]) -> list[float | None]:
    """Each prompt prefilled from an empty KV cache by the fast model alone, in chunks as the
    background prefill feeds them."""
    from inference.engine import Engine, EngineConfig
    from inference.router import FAST, Task
    from models.choice import selected_model

    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    model = engine.load(FAST)
    serving = engine.serving_plan(Task.COMPLETION)
    times: list[float | None] = []
    engine.warm(serving, "def warm_up():\n    return 1\n", None, threading.Event())
    for prompt in prompts:
        if not prompt.strip():
            times.append(None)
            continue
        model.pool.clear()
        started = time.perf_counter()
        engine.warm(serving, prompt, None, threading.Event())
        times.append(round(time.perf_counter() - started, 3))
    return times


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    lat = [o.latency_ms for o in outcomes if o.latency_ms is not None]
    ready = [o.ready_s for o in outcomes if o.ready_s is not None]
    return {
        "positions": n,
        "exact": sum(o.exact for o in outcomes),
        "exact_share": round(sum(o.exact for o in outcomes) / n, 3) if n else None,
        "edit_similarity": round(100 * statistics.mean(o.similarity for o in outcomes), 1)
        if n
        else None,
        "short": sum(o.short for o in outcomes),
        "whole": n - sum(o.short for o in outcomes),
        "ready_by_ask": len(ready),
        "p50_ms": percentile(lat, 0.5),
        "p95_ms": percentile(lat, 0.95),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--positions", type=int, default=20, help="per repository")
    parser.add_argument("--rest-ms", default="4000", help="comma-separated, a row each")
    parser.add_argument("--repos", default="", help="comma-separated folders (default: eval repos)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="a server started for each position, the file opened at once (models loading)",
    )
    parser.add_argument(
        "--reopen-ms",
        type=int,
        default=None,
        help="then open each file again and ask this long after its focus (one server per repo)",
    )
    parser.add_argument(
        "--kv-store-mb",
        default=None,
        help="the servers' KV store size (FASTCOMPLETE_KV_STORE_MB; 0: off); default: theirs",
    )
    parser.add_argument("--no-engine", action="store_true", help="skip the engine's own prefill")
    parser.add_argument("--json", type=Path, default=Path("bench/results/warm_open.json"))
    args = parser.parse_args()
    repos = [Path(r) for r in args.repos.split(",") if r] or default_repos()
    rests = [int(r) / 1000 for r in args.rest_ms.split(",")]
    cases = {root: one_per_file(root, args.positions, args.seed) for root in repos}
    if args.kv_store_mb is not None:
        os.environ["FASTCOMPLETE_KV_STORE_MB"] = args.kv_store_mb
    reopen_s = args.reopen_ms / 1000 if args.reopen_ms is not None else None
    rows: dict[str, list[Outcome]] = {}
    for rest in rests:
        label = f"rest {rest:g} s"
        rows[label] = []
        again = f"reopened, rest {reopen_s or 0:g} s (after {label})"
        for root in repos:
            started = time.perf_counter()
            first, reopened = asyncio.run(run_repo(root, cases[root], rest, args.fresh, reopen_s))
            rows[label] += first
            if reopen_s is not None:
                rows.setdefault(again, []).extend(reopened)
            print(f"done: {label}, {root.name} ({time.perf_counter() - started:.0f} s)", flush=True)
    first = next(iter(rows.values()))
    engine_s = (
        [None] * len(first) if args.no_engine else engine_prefill_s([o.prompt for o in first])
    )
    print(f"\n{os.environ.get('FASTCOMPLETE_MODEL', 'default model')}: a file just opened")
    print(
        "| rest | positions | exact | edit sim | from the whole prompt | ready by the ask "
        "| p50 / p95 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, outcomes in rows.items():
        s = summarize(outcomes)
        print(
            f"| {label} | {s['positions']} | {100 * (s['exact_share'] or 0):.1f}% "
            f"| {s['edit_similarity']} | {s['whole']} of {s['positions']} "
            f"| {s['ready_by_ask']} | {s['p50_ms']} / {s['p95_ms']} |"
        )
    pairs = []
    for label, outcomes in rows.items():
        if label.startswith("reopened"):
            continue  # what its prefill computed is what the store lacked: not comparable
        for o, e in zip(outcomes, engine_s, strict=True):
            rec = o.prefill
            if rec and rec.get("ready_s") is not None and e:
                pairs.append((label, rec, e))
    if pairs:
        server = [rec["ready_s"] for _, rec, _ in pairs]
        engine = [e for _, _, e in pairs]
        plan = [rec["plan_s"] for _, rec, _ in pairs]
        warm = [rec["warm_s"] for _, rec, _ in pairs]
        ratio = statistics.median(s / e for s, e in zip(server, engine, strict=True))
        print(
            f"\ndidFocus -> whole prompt cached, {len(pairs)} prefills: server p50 "
            f"{statistics.median(server):.2f} s (planning {statistics.median(plan):.2f} s, "
            f"prefilling {statistics.median(warm):.2f} s), the engine alone on the same prompts "
            f"p50 {statistics.median(engine):.2f} s; server / engine per prompt, median "
            f"{ratio:.2f}x"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "model": os.environ.get("FASTCOMPLETE_MODEL"),
                "engine_prefill_s": engine_s,
                "rows": {k: [asdict(o) for o in v] for k, v in rows.items()},
                "summary": {k: summarize(v) for k, v in rows.items()},
            },
            indent=1,
        )
    )
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
