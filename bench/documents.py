"""Document bookkeeping on large files: what every keystroke costs before any model runs.

    python -m bench.documents [--mb 10]

Times (median of 7) a position lookup near the end of the document, one incremental edit there,
and for comparison the line-by-line scan the server used before and pygls's own edit path.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from lsprotocol import types
from pygls.workspace import TextDocument

from lsp_server.text.edits import apply_change
from lsp_server.text.positions import LINE_BREAK, offset_at

LINE = "hello = 'wörld' 👋\n"


def median_ms(fn: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def line_by_line(text: str, line: int) -> int:
    start = 0
    for _ in range(line):
        found = LINE_BREAK.search(text, start)
        assert found is not None
        start = found.end()
    return start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    lines = int(args.mb * 1_000_000 / len(LINE.encode()))
    text = LINE * lines
    line = lines - 10
    rng = types.Range(types.Position(line, 3), types.Position(line, 3))
    edit = types.TextDocumentContentChangePartial(range=rng, text="x")

    def pygls_edit() -> None:
        TextDocument("file:///bench.py", source=text).apply_change(edit)

    rows = {
        "position lookup (lsp_server.text.positions)": median_ms(lambda: offset_at(text, line, 3)),
        "position lookup, line by line (before)": median_ms(lambda: line_by_line(text, line)),
        "edit (lsp_server.text.edits)": median_ms(lambda: apply_change(text, edit)),
        "edit (pygls TextDocument)": median_ms(pygls_edit),
    }
    print(f"{len(text.encode()) / 1e6:.1f} MB, {lines} lines, position at line {line}")
    for name, ms in rows.items():
        print(f"  {name:42s} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
