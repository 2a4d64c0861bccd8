"""Typing replay: real files typed character by character through a real LSP client.

    python bench/typing_replay.py [--chars 240] [--gap-ms 90 --pause-ms 700] [--no-focus]
                           [--path FILE] [--json bench/results/typing.json]

For each file size (a 50-line and a 2,000-line Python standard-library file) and fast mode on and
off: a fresh `fastcomplete serve`, the file opened without one region, and that region typed back
with human-like gaps between keys (log-normal around 140 ms, longer pauses after newlines), or
with `--gap-ms` a steady gap and `--pause-ms` a pause at the end of each line (before its
newline; `--pause-at next`: after it and the next line's indentation). After every key the
client sends didChange and an inline-completion request, cancelling the previous request as VS
Code does, and `fastcomplete/didFocus` when the cursor rests 150 ms; `--no-focus` leaves that
out, as a plain LSP client (Neovim's built-in, Helix, Emacs) does. `--path FILE` types into that
file instead (e.g. a ~1,100-line file of an unseen repository: issue 49's protocol). Latency is
measured at the client, from request to answer; a key counts as shown when its suggestion arrives
before the next key, a line-end pause when one arrives within it (`pauses_300ms`: within 300 ms
of the pause's start).
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
import sysconfig
from pathlib import Path
from typing import Any

from bench.lsp_replay import (
    Asked,
    ask_inline,
    cancel,
    did_focus,
    did_insert,
    did_open,
    end_position,
    human_gaps,
    percentile,
    start_server,
    stop_server,
)
from lsp_server.text.languages import EXTENSIONS
from models.choice import selected_model

FOCUS_AFTER_S = 0.15  # the clients send fastcomplete/didFocus when the cursor rests this long
OPEN_S = 2.0  # an editor is open a moment before the first key
FILES = {"50 lines": ("textwrap.py", 50), "2000 lines": ("argparse.py", 2000)}


def _doc(name: str, lines: int) -> str:
    path = Path(name) if Path(name).is_absolute() else Path(sysconfig.get_paths()["stdlib"]) / name
    return "\n".join(path.read_text().split("\n")[:lines])


def _region(text: str, chars: int) -> tuple[str, str, str]:
    """(before, typed, after): the typed region is the last whole lines, at least `chars`
    characters, ending near the end of the file, so the prompt is long on the long file. Whole
    lines: a region cut inside its last line would leave that line's rest after the cursor at
    every line end typed before it, a document no one types into."""
    lines = text.split("\n")
    end = len(lines) - 3
    start = end
    while start > 0 and sum(len(r) + 1 for r in lines[start:end]) < chars:
        start -= 1
    before = "\n".join(lines[:start]) + "\n"
    typed = "\n".join(lines[start:end])
    after = text[len(before) + len(typed) :]
    return before, typed, after


def gaps(
    typed: str, seed: int, gap_s: float | None, pause_s: float, pause_at: str = "end"
) -> list[float]:
    """The wait after each key: human-like (bench.lsp_replay.human_gaps), or `gap_s` with
    `pause_s` at each line's end: after its last character ("end"), or after the newline and
    the next line's indentation ("next": where a person starts the next line)."""
    if gap_s is None:
        return human_gaps(typed, seed)
    waits = []
    for i in range(len(typed)):
        after = typed[i + 1 : i + 2]
        line_so_far = typed[: i + 1].rsplit("\n", 1)[-1]
        if pause_at == "end":
            pause = after == "\n" and line_so_far.strip() != ""
        else:
            pause = "\n" in typed[: i + 1] and not line_so_far.strip() and after.strip() != ""
        waits.append(pause_s if pause else gap_s)
    return waits


def _in_time(asked: Asked, within_s: float) -> bool:
    return (
        bool(asked.items) and asked.arrived is not None and asked.arrived - asked.sent <= within_s
    )


async def replay(
    label: str,
    text: str,
    fast_mode: bool,
    planned: list[float],
    chars: int,
    focus: bool = True,
    workspace: Path | None = None,
    index_on: bool = True,
    suffix: str = ".py",
) -> dict[str, Any]:
    """One typing run; `workspace`: the folder the editor has open (indexed before typing
    starts when `index_on`), the typed file among its files."""
    settings = {"fastMode": fast_mode, "workspaceIndex": index_on}
    served = await start_server(settings, "typing", workspace)
    client = served.client
    while workspace is not None and index_on:
        stats = await client.command("fastcomplete.stats")
        if stats["index"]["state"] != "building":
            break  # the workspace indexed
        await asyncio.sleep(0.2)
    name = f"typed{suffix}"
    uri = (workspace / name).as_uri() if workspace else f"file:///bench/{name}"
    before, typed, after = _region(text, chars)
    did_open(client, uri, EXTENSIONS.get(suffix, "python"), before + after)
    await asyncio.sleep(OPEN_S)
    current = before
    asked: list[tuple[Asked, float]] = []  # each request and the wait after its key
    for i, (ch, gap) in enumerate(zip(typed, planned, strict=True)):
        did_insert(client, uri, i + 2, end_position(current), ch)
        current += ch
        if asked and asked[-1][0].arrived is None:
            cancel(client, asked[-1][0].msg_id)
        asked.append((ask_inline(client, uri, end_position(current), f"req-{i}"), gap))
        if focus and gap > FOCUS_AFTER_S:  # the cursor rested: our clients tell the server where
            await asyncio.sleep(FOCUS_AFTER_S)
            did_focus(client, uri, end_position(current))
            gap -= FOCUS_AFTER_S
        await asyncio.sleep(gap)
    with contextlib.suppress(Exception):  # error answers (cancelled) are recorded on Asked
        await asyncio.wait_for(
            asyncio.gather(*(a.future for a, _ in asked), return_exceptions=True), 60
        )
    stats = await stop_server(served)
    model = f"{selected_model()}/{'fast' if fast_mode else 'standard'}"
    m = stats["models"].get(model, {})
    lat = [a.latency_ms for a, _ in asked if a.items and a.latency_ms is not None]
    pauses = [(a, gap) for a, gap in asked if gap >= 0.5]
    return {
        "file": label,
        "fast_mode": fast_mode,
        "focus": focus,
        "index": stats["index"].get("files", 0) if index_on and workspace else "off",
        "requests": len(asked),
        "answered": sum(bool(a.items) for a, _ in asked),
        "shown": sum(_in_time(a, gap) for a, gap in asked),
        "empty": sum(not a.items and not a.failed for a, _ in asked),
        "cancelled": sum(a.failed for a, _ in asked),
        "pauses": len(pauses),
        "pauses_shown": sum(_in_time(a, gap) for a, gap in pauses),
        "pauses_300ms": sum(_in_time(a, 0.3) for a, _ in pauses),
        "server_stale_dropped": stats["server"].get("stale_dropped", 0),
        "short_context": stats["server"].get("short_context", 0),
        "whole_after_short": stats["server"].get("whole_after_short", 0),
        "prefills": stats.get("prefill", {}).get("runs"),
        "latency_p50_ms": percentile(lat, 0.5),
        "latency_p95_ms": percentile(lat, 0.95),
        "ttft_p50_ms": m.get("ttft_ms", {}).get("p50") and round(m["ttft_ms"]["p50"], 1),
        "kv_reuse_share": m.get("kv_reuse_share") and round(m["kv_reuse_share"], 3),
        "prompt_tokens": m.get("prompt_tokens"),
        "pause_detail": [_pause(a) for a, _ in pauses],
        "server": {k: stats["server"].get(k, 0) for k in SERVER_COUNTS},
    }


SERVER_COUNTS = ("in_flight_hits", "type_through", "held_back", "prefetched", "prefetch_hits")


def _pause(asked: Asked) -> dict[str, Any]:
    """One pause: how long its answer took and what it was (for reading, not a figure)."""
    return {"ms": asked.latency_ms and round(asked.latency_ms), "shown": asked.shown[:60]}


COLS = [
    "file",
    "fast_mode",
    "focus",
    "index",
    "requests",
    "answered",
    "shown",
    "cancelled",
    "pauses",
    "pauses_shown",
    "pauses_300ms",
    "short_context",
    "latency_p50_ms",
    "latency_p95_ms",
    "ttft_p50_ms",
    "kv_reuse_share",
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--chars", type=int, default=240, help="characters typed per run (whole lines, at least)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--gap-ms", type=int, help="a steady gap between keys (default: human)")
    parser.add_argument(
        "--pause-ms", type=int, default=700, help="with --gap-ms: the pause at each line's end"
    )
    parser.add_argument(
        "--pause-at",
        choices=("end", "next"),
        default="end",
        help="with --gap-ms: pause after a line's last character, or at the next line's start",
    )
    parser.add_argument(
        "--no-focus",
        action="store_true",
        help="send no fastcomplete/didFocus (a plain LSP client); with --focus-both, both rows",
    )
    parser.add_argument("--focus-both", action="store_true", help="rows with and without didFocus")
    parser.add_argument("--files", default=",".join(FILES), help=f"of: {', '.join(FILES)}")
    parser.add_argument("--fast-only", action="store_true", help="no fast-mode-off rows")
    parser.add_argument("--path", type=Path, help="type into this file (all its lines) instead")
    parser.add_argument("--json", type=Path, default=Path("bench/results/typing.json"))
    parser.add_argument(
        "--workspace",
        type=Path,
        help="type into a file of this folder, with the workspace index on and off (fast mode)",
    )
    args = parser.parse_args()
    labels = [f.strip() for f in args.files.split(",")]
    if args.path:
        path = args.path.resolve()
        FILES[path.name] = (str(path), len(path.read_text().split("\n")))
        labels = [path.name]
    if unknown := [f for f in labels if f not in FILES]:
        parser.error(f"unknown file(s) {unknown}: choose from {list(FILES)}")
    focuses = [True, False] if args.focus_both else [not args.no_focus]
    modes = [True] if args.fast_only else [True, False]
    runs = [(fast, label, True, f) for f in focuses for fast in modes for label in labels]
    if args.workspace:
        runs = [(True, label, on, f) for f in focuses for on in (False, True) for label in labels]
    gap_s = args.gap_ms / 1000 if args.gap_ms else None
    rows = []
    for fast_mode, label, index_on, focus in runs:
        name, lines = FILES[label]
        _, typed, _ = _region(_doc(name, lines), args.chars)
        planned = gaps(typed, args.seed, gap_s, args.pause_ms / 1000, args.pause_at)
        row = asyncio.run(
            replay(
                label,
                _doc(name, lines),
                fast_mode,
                planned,
                args.chars,
                focus,
                args.workspace.resolve() if args.workspace else None,
                index_on,
                Path(name).suffix or ".py",
            )
        )
        rows.append(row)
        print(f"done: {label}, fast mode {'on' if fast_mode else 'off'}", file=sys.stderr)
    where = "line ends" if args.pause_at == "end" else "each next line's start"
    keys = f"{args.gap_ms} ms a key, {args.pause_ms} ms at {where}" if gap_s else "human gaps"
    print(f"\ntyping replay, {selected_model()} ({keys}; each key: didChange + inlineCompletion,")
    print("previous request cancelled; shown: a suggestion before the next key)\n")
    print(" | ".join(COLS))
    for row in rows:
        print(" | ".join(str(row[c]) for c in COLS))
    fast = {r["file"]: r for r in rows if r["fast_mode"] and r["focus"] == focuses[0]}
    if {"50 lines", "2000 lines"} <= fast.keys():
        short, long = fast["50 lines"]["latency_p50_ms"], fast["2000 lines"]["latency_p50_ms"]
        if short and long:
            print(f"\nfast mode p50, 2000-line / 50-line file: {long / short:.2f} (target <= 1.5)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "chars": args.chars,
        "gap_ms": args.gap_ms,
        "pause_ms": args.pause_ms,
        "pause_at": args.pause_at,
        "rows": rows,
    }
    args.json.write_text(json.dumps(payload, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
