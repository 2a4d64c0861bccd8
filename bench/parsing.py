"""tree-sitter work per keystroke on a 2,000-line file: full parses (before) vs one kept tree.

    python -m bench.parsing [--chars 240]

The typing benchmark's region of `argparse.py` (first 2,000 lines) is typed back one character
at a time. Per keystroke, and before any model runs:
- before: what the server did until the redesign: the context builder parsed the whole document
  and again the text above the prompt's window, and the syntax check parsed the document before
  and after the completion (four full parses);
- now: the edit is applied to the document's tree (`Tree.edit`) and parsed incrementally once;
  the syntax check is one incremental parse of the tree with the completion inserted.
The completion checked is the rest of the real line (what a right suggestion would insert).
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import time
from pathlib import Path

from lsprotocol import types

from inference.metrics import percentile
from lsp_server.completion.run import adds_syntax_errors
from lsp_server.prompting.context import window_start
from lsp_server.text.documents import Documents
from lsp_server.text.positions import position_at
from lsp_server.text.syntax import parse, syntax_issues

URI = "file:///bench/argparse.py"


def _text(lines: int) -> str:
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    return "\n".join(text.split("\n")[:lines])


def _full_parses(text: str, offset: int, completion: str) -> None:
    parse("python", text)
    lines = text[:offset].split("\n")
    start = window_start(lines, len(lines) - 1, 1536, lambda s: len(s) // 3)
    parse("python", "\n".join(lines[:start]))
    syntax_issues("python", text)
    syntax_issues("python", text[:offset] + completion + text[offset:])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chars", type=int, default=240)
    ap.add_argument("--lines", type=int, default=2000)
    args = ap.parse_args(argv)
    full = _text(args.lines)
    lines = full.split("\n")
    end = len(full) - sum(len(r) + 1 for r in lines[-3:])  # near the end, as bench/typing_replay.py
    start = end - args.chars
    before_ms: list[float] = []
    after_ms: list[float] = []
    docs = Documents()
    text = full[:start] + full[end:]
    docs.open(URI, text, 1, "python")
    docs.snapshot(URI)
    for i in range(start, end):
        ch = full[i]
        offset = i + 1
        pos = types.Position(*position_at(text, i))
        change = types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=ch)
        text = text[:i] + ch + text[i:]
        completion = full[offset:].split("\n", 1)[0]
        t0 = time.perf_counter()
        _full_parses(text, offset, completion)
        t1 = time.perf_counter()
        docs.change(URI, i + 2, [change])
        snap = docs.snapshot(URI)
        adds_syntax_errors(snap.text, offset, completion, "python", snap.tree)
        t2 = time.perf_counter()
        before_ms.append((t1 - t0) * 1000)
        after_ms.append((t2 - t1) * 1000)
    assert text == full

    def row(label: str, xs: list[float]) -> str:
        p95 = percentile(xs, 0.95)
        return f"| {label} | {statistics.median(xs):.2f} | {p95:.2f} | {statistics.mean(xs):.2f} |"

    print(f"tree-sitter per keystroke, {args.lines}-line file, {args.chars} keys typed\n")
    print("| per keystroke | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|")
    print(row("before: 4 full parses", before_ms))
    print(row("now: 1 incremental parse + 1 incremental check", after_ms))
    ratio = statistics.median(before_ms) / statistics.median(after_ms)
    print(
        f"\n{ratio:.1f}x less parse time per keystroke (p50); parses by the kept tree: "
        f"{docs.get(URI).parses} for {args.chars} keys"
    )


if __name__ == "__main__":
    main()
