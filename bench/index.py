"""Workspace index: build time, reuse from the stored index, memory, and query latency.

    .venv/bin/python bench/index.py [--root DIR] [--queries 50]

Indexes a tree of about 2,000 source files (default: Python's standard library; its
site-packages folder is skipped like any other) into a temporary store. Each build runs in a
process of its own, so that its peak RSS is its own: the first build (every file read and
parsed), then a restart's build (every file reused from the store). The second process then
times `search()` and `definitions()` for queries taken from the tree the way the server takes
them: 64-line blocks of real files (seeded), the query's own file skipped, the names of the
block looked up as definitions.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import json
import random
import resource
import statistics
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from inference.metrics import percentile
from lsp_server.config.tuning import WINDOW_STEP_LINES
from lsp_server.text.languages import IDENT, SOURCE_EXTENSIONS
from lsp_server.text.syntax import parse
from lsp_server.workspace.exclusions import SKIPPED_DIRS
from lsp_server.workspace.index import WorkspaceIndex

QUERY_LINES = WINDOW_STEP_LINES  # the server's query: the block around the cursor
BUDGET_CHARS = 2000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def queries(root: Path, index: WorkspaceIndex, count: int) -> list[tuple[str, str]]:
    """(relative path, 64-line block) from `count` source files with enough lines."""
    paths = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        paths += [
            Path(folder, f)
            for f in sorted(files)
            if os.path.splitext(f)[1] in SOURCE_EXTENSIONS
            and not index.exclusions.excluded(Path(folder, f))
        ]
    rng = random.Random(7)
    rng.shuffle(paths)
    out = []
    for path in paths:
        rel = index.relative(path)
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        if rel is None or len(lines) < 2 * QUERY_LINES:
            continue
        start = rng.randrange(0, len(lines) - QUERY_LINES)
        out.append((rel, "\n".join(lines[start : start + QUERY_LINES])))
        if len(out) == count:
            break
    return out


def phase(root: Path, store: Path, queries_wanted: int) -> dict[str, Any]:
    """One build in this process (the first, or a restart's); after a restart's, the queries."""
    parse("python", "x = 1")  # grammar loaded before the baseline: not the index's memory
    before = peak_rss_mb()
    index = WorkspaceIndex(root, store)
    report = index.build()
    out: dict[str, Any] = {
        "files": report.files,
        "read": report.read,
        "reused": report.reused,
        "skipped": report.skipped,
        "truncated": report.truncated,
        "seconds": report.seconds,
        "rss_growth_mb": peak_rss_mb() - before,
    }
    if queries_wanted:
        search_ms, definitions_ms, hits, found = [], [], 0, 0
        for rel, text in queries(root, index, queries_wanted):
            began = time.perf_counter()
            snippets = index.search(text, budget_chars=BUDGET_CHARS, skip={rel})
            search_ms.append(1000 * (time.perf_counter() - began))
            hits += bool(snippets)
            names = list(dict.fromkeys(IDENT.findall(text)))
            began = time.perf_counter()
            found += len(index.definitions(names, skip={rel}))
            definitions_ms.append(1000 * (time.perf_counter() - began))
        out |= {
            "queries": len(search_ms),
            "search_hits": hits,
            "definitions_found": found,
            "search_ms": [statistics.median(search_ms), percentile(search_ms, 0.95)],
            "definitions_ms": [statistics.median(definitions_ms), percentile(definitions_ms, 0.95)],
        }
    return out


def run_phase(root: Path, store: Path, queries_wanted: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--root", str(root), "--store", str(store)]
    command += ["--phase", "--queries", str(queries_wanted)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.root, args.store, args.queries)))
        return
    with tempfile.TemporaryDirectory() as store_dir:
        store = Path(store_dir)
        first = run_phase(args.root, store, 0)
        second = run_phase(args.root, store, args.queries)
        stored = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    print(f"root: {args.root}")
    print(
        f"files indexed        {first['files']:8d}   (skipped {first['skipped']}"
        f"{', file limit reached' if first['truncated'] else ''})"
    )
    print(f"first build          {first['seconds']:8.2f} s   ({first['read']} files read)")
    print(
        f"restart (reused)     {second['seconds']:8.2f} s   ({second['reused']} reused, "
        f"{second['read']} read)"
    )
    print(f"peak RSS growth      {first['rss_growth_mb']:8.1f} MB  first build")
    print(f"                     {second['rss_growth_mb']:8.1f} MB  restart")
    print(f"store file           {stored / 1e6:8.1f} MB")
    s_med, s_p95 = second["search_ms"]
    d_med, d_p95 = second["definitions_ms"]
    print(
        f"search()             {s_med:8.2f} ms median, {s_p95:.2f} ms p95 "
        f"({second['queries']} queries, {second['search_hits']} with snippets)"
    )
    print(
        f"definitions()        {d_med:8.3f} ms median, {d_p95:.3f} ms p95 "
        f"({second['definitions_found']} definitions found)"
    )


if __name__ == "__main__":
    main()
