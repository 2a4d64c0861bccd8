"""Completions while the server indexes a 2,000-file workspace, and after.

    .venv/bin/python bench/index_serving.py [--root DIR]

Starts `fastcomplete serve` (fresh home: nothing stored, every file read) with the workspace
open at ROOT (default: Python's standard library, ~1,800 source files), opens one of its files
and asks for a completion at a line end every 0.4 s while the index builds, then the same
positions again once it is ready. Prints build time, completion latency p50/p95 during and
after the build, the server's peak RSS, and the stored index's size.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import asyncio
import sysconfig
import time
from pathlib import Path

from lsprotocol import types

from bench.lsp_replay import (
    ask_inline,
    did_open,
    percentile,
    rss_mb,
    server_process,
    start_server,
    stop_server,
)

ASK_EVERY_S = 0.4
FILE = "argparse.py"


async def _ask(served, uri: str, lines: list[str], n: int, tag: str) -> list[float]:
    """`n` completions at the ends of code lines spread over the file; latencies in ms."""
    rows = [i for i, r in enumerate(lines) if r.strip() and not r.strip().startswith("#")]
    latencies = []
    for k in range(n):
        row = rows[(k * 97) % len(rows)]
        at = types.Position(row, len(lines[row].encode("utf-16-le")) // 2)
        asked = ask_inline(served.client, uri, at, f"{tag}-{k}")
        await asked.future
        if asked.latency_ms is not None:
            latencies.append(asked.latency_ms)
        await asyncio.sleep(ASK_EVERY_S)
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    parser.add_argument("--n", type=int, default=20, help="completions after the build")
    args = parser.parse_args()
    root = args.root.resolve()
    served = await start_server({"debounceMs": 0}, "index", workspace=root)
    client = served.client
    started = time.perf_counter()
    path = root / FILE if (root / FILE).exists() else next(root.rglob("*.py"))
    text = path.read_text(encoding="utf-8")
    uri = path.as_uri()
    did_open(client, uri, "python", text)
    lines = text.split("\n")
    during: list[float] = []
    k = 0
    while True:
        stats = await client.command("fastcomplete.stats")
        if stats["index"]["state"] != "building":
            break
        during += await _ask(served, uri, lines, 1, f"during-{k}")
        k += 1
    built_s = time.perf_counter() - started
    after = await _ask(served, uri, lines, max(args.n, len(during)), "after")
    process = server_process(client)
    rss = rss_mb(process.pid) if process is not None else None
    stats = await stop_server(served)
    stored = sum(f.stat().st_size for f in Path(served.home, "index").rglob("*") if f.is_file())
    index = stats["index"]
    print(f"workspace {root}: {index.get('files')} files, state {index['state']}")
    print(f"index build (server's own figure): {index.get('build_s')} s; wall {built_s:.1f} s")
    for name, values in (("during the build", during), ("after the build", after)):
        p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
        print(
            f"completions {name}: {len(values)} answered, "
            f"p50 {p50 or 0:.0f} ms, p95 {p95 or 0:.0f} ms"
        )
    print(f"server peak RSS: {rss:.0f} MB" if rss else "server peak RSS: unknown")
    print(f"stored index: {stored / 1e6:.1f} MB")


if __name__ == "__main__":
    asyncio.run(main())
