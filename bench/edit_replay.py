"""Recent edits: is the suggestion right at a place that depends on an edit made elsewhere?

    FASTCOMPLETE_HOME=/tmp/fchome .venv/bin/python -m bench.edit_replay --repo PATH [--commits 120]

Cases come from a repository's history, so the edits are people's, not made up. In a commit, a
name that exists nowhere in its parent's tree is defined in one file's hunk (a def or class, a
def line's new parameter, a field or an assignment) and used in an added line of another file:
a new field read elsewhere, a renamed parameter passed by keyword, a new function called.

Each case is replayed over LSP to a real `fastcomplete serve` (no workspace folder: the index
was built before the edit and could not know the name either):
1. open the defining file as it was in the parent and apply its hunk (one didChange: the edit);
2. open the using file as it was in the parent and type the using hunk's lines up to the name
   (one didChange: the person writing there; the defining file stays open in its tab);
3. ask for the inline completion at the cursor.
The suggestion is right when the identifier it starts with is the name; `line` counts the ones
that are the rest of the line exactly. Each configuration runs on a fresh server, on the same
cases in the same order: recentEdits on, then off. Results go to bench/results/edit_replay.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from bench.lsp_replay import (
    Served,
    ask_inline,
    did_close,
    did_open,
    start_server,
    stop_server,
    utf16_len,
)
from lsp_server.text.languages import IDENT

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEF_LINE = re.compile(r"^\s*(?:async\s+)?def\s|^\s*class\s")
MAX_DEF_HUNK_LINES = 30  # an edit, not a new module pasted in
CASES_PER_COMMIT = 3
ANSWER_TIMEOUT_S = 30.0
SETTLE_S = 0.3  # between the edits and the ask: the editor's debounce


@dataclass(frozen=True)
class Hunk:
    path: str
    old_start: int  # 0-based first line replaced in the parent
    old_count: int
    added: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    commit: str
    name: str
    def_path: str
    def_parent: str  # the defining file in the parent
    def_hunk: Hunk
    use_path: str
    use_parent: str
    use_hunk: Hunk
    use_row: int  # index in use_hunk.added of the line that uses the name
    use_col: int  # where the name starts in it

    @property
    def typed(self) -> str:
        """What the person types in place of the using hunk's old lines, up to the name."""
        rows = self.use_hunk.added
        return "".join(f"{r}\n" for r in rows[: self.use_row]) + rows[self.use_row][: self.use_col]

    @property
    def rest_of_line(self) -> str:
        return self.use_hunk.added[self.use_row][self.use_col :]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace"
    )
    return done.stdout


def hunks(diff: str) -> list[Hunk]:
    """The hunks of a `git diff -U0`: where each replaces its parent's lines, and its new lines."""
    out: list[Hunk] = []
    path: str | None = None
    current: tuple[str, int, int, list[str]] | None = None

    def flush() -> None:
        if current is not None:
            out.append(Hunk(current[0], current[1], current[2], tuple(current[3])))

    for line in diff.split("\n"):
        if line.startswith("diff --git"):
            flush()
            current, path = None, None
        elif line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif m := HUNK.match(line):
            flush()
            current = None
            if path is not None:
                count = int(m.group(2)) if m.group(2) is not None else 1
                start = int(m.group(1)) - 1 if count else int(m.group(1))
                current = (path, start, count, [])
        elif current is not None and line.startswith("+"):
            current[3].append(line[1:])
    flush()
    return out


def defines(line: str, name: str) -> bool:
    word = re.escape(name)
    if DEF_LINE.match(line):
        return re.search(rf"\b{word}\b", line) is not None
    return re.match(rf"^\s*(?:self\.)?{word}\s*(?::|=(?!=))", line) is not None


def commit_cases(repo: Path, commit: str) -> list[Case]:
    parent = f"{commit}^"
    diff = git(repo, "diff", "-U0", "--no-renames", parent, commit, "--", "*.py")
    found = hunks(diff)
    existing = set(git(repo, "ls-tree", "-r", "--name-only", parent).split("\n"))
    cases: list[Case] = []
    tried: set[str] = set()
    for use in found:
        if use.path not in existing:
            continue
        for row, line in enumerate(use.added):
            for m in IDENT.finditer(line):
                name = m.group()
                if len(name) < 4 or name in tried or defines(line, name):
                    continue
                before = line[: m.start()]
                if "#" in before or before.count('"') % 2 or before.count("'") % 2:
                    continue  # in a comment or a string: not code that depends on the edit
                tried.add(name)
                definition = next(
                    (
                        h
                        for h in found
                        if h.path != use.path
                        and h.path in existing
                        and len(h.added) <= MAX_DEF_HUNK_LINES
                        and any(defines(r, name) for r in h.added)
                    ),
                    None,
                )
                if definition is None or any(re.search(rf"\b{name}\b", r) for r in use.added[:row]):
                    continue
                there = subprocess.run(
                    ["git", "-C", str(repo), "grep", "-q", "-w", "-F", name, parent],
                    capture_output=True,
                )
                if there.returncode == 0:
                    continue  # the name existed before the commit
                cases.append(
                    Case(
                        commit[:10],
                        name,
                        definition.path,
                        git(repo, "show", f"{parent}:{definition.path}"),
                        definition,
                        use.path,
                        git(repo, "show", f"{parent}:{use.path}"),
                        use,
                        row,
                        m.start(),
                    )
                )
                if len(cases) >= CASES_PER_COMMIT:
                    return cases
    return cases


def mine(repo: Path, commits: int) -> list[Case]:
    shas = git(repo, "rev-list", "--no-merges", f"--max-count={commits}", "HEAD").split()
    return [case for sha in shas for case in commit_cases(repo, sha)]


def replaced(parent: str, hunk: Hunk, text: str) -> types.TextDocumentContentChangePartial:
    """The didChange that puts `text` in place of the hunk's old lines."""
    rows = parent.split("\n")
    start = types.Position(min(hunk.old_start, len(rows)), 0)
    end = types.Position(min(hunk.old_start + hunk.old_count, len(rows)), 0)
    return types.TextDocumentContentChangePartial(range=types.Range(start, end), text=text)


def change(
    served: Served, uri: str, version: int, edit: types.TextDocumentContentChangePartial
) -> None:
    served.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[edit],
        )
    )


async def replay(served: Served, case: Case, index: int) -> dict[str, object]:
    root = f"file:///replay/{index}"
    def_uri, use_uri = f"{root}/{case.def_path}", f"{root}/{case.use_path}"
    did_open(served.client, def_uri, "python", case.def_parent)
    added = "".join(f"{r}\n" for r in case.def_hunk.added)
    change(served, def_uri, 2, replaced(case.def_parent, case.def_hunk, added))
    did_open(served.client, use_uri, "python", case.use_parent)
    typed = case.typed
    change(served, use_uri, 2, replaced(case.use_parent, case.use_hunk, typed + "\n"))
    await asyncio.sleep(SETTLE_S)
    line = case.use_hunk.old_start + case.use_row
    at = types.Position(line, utf16_len(typed.rsplit("\n", 1)[-1]))
    asked = ask_inline(served.client, use_uri, at, f"edit-{index}")
    with contextlib.suppress(Exception):  # a failed or late answer: no suggestion
        await asyncio.wait_for(asyncio.shield(asked.future), ANSWER_TIMEOUT_S)
    shown = asked.shown
    did_close(served.client, use_uri)
    did_close(served.client, def_uri)
    spelled = re.match(r"[A-Za-z_][A-Za-z0-9_]*", shown)
    return {
        "commit": case.commit,
        "name": case.name,
        "def": case.def_path,
        "use": case.use_path,
        "line_prefix": typed.rsplit("\n", 1)[-1].strip(),
        "shown": shown,
        "right": bool(spelled and spelled.group() == case.name),
        "line": shown.split("\n", 1)[0].rstrip() == case.rest_of_line.rstrip() and bool(shown),
    }


async def run(cases: list[Case], on: bool) -> dict[str, object]:
    # The suggestion, not whether this person's gate would show it (bench/assist.py has that).
    settings = {"fastMode": True, "recentEdits": on, "showGate": False}
    served = await start_server(settings, "edits")
    rows = [await replay(served, case, i) for i, case in enumerate(cases)]
    await stop_server(served)
    right = sum(bool(r["right"]) for r in rows)
    return {
        "recentEdits": on,
        "cases": len(rows),
        "right": right,
        "line": sum(bool(r["line"]) for r in rows),
        "shown": sum(bool(r["shown"]) for r in rows),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", type=Path, required=True, help="a git repository with history")
    parser.add_argument("--commits", type=int, default=120, help="newest non-merge commits read")
    parser.add_argument("--max-cases", type=int, default=80)
    parser.add_argument("--list", action="store_true", help="print the cases and stop")
    parser.add_argument("--only", choices=("on", "off"), help="run one configuration")
    parser.add_argument("--json", type=Path, default=Path("bench/results/edit_replay.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    cases = mine(args.repo, args.commits)[: args.max_cases]
    print(
        f"{len(cases)} cases from {args.repo} ({time.perf_counter() - started:.0f} s)",
        file=sys.stderr,
    )
    if args.list:
        for c in cases:
            print(
                f"{c.commit} {c.name:28} {c.def_path} -> {c.use_path}: {c.typed.rsplit(chr(10), 1)[-1].strip()!r}"
            )
        return 0
    if not cases:
        print(
            "no cases: the history has no name defined in one file and used in another",
            file=sys.stderr,
        )
        return 1
    configs = (True, False) if args.only is None else (args.only == "on",)
    results = [asyncio.run(run(cases, on)) for on in configs]
    print(f"{'recentEdits':12} {'cases':>6} {'shown':>6} {'right':>6} {'line':>6}")
    for r in results:
        share = r["right"] / r["cases"]  # type: ignore[operator]
        print(
            f"{'on' if r['recentEdits'] else 'off':12} {r['cases']:>6} {r['shown']:>6} {r['right']:>6} {r['line']:>6}  ({share:.1%} right)"
        )
    if len(results) == 2:
        on, off = results[0]["right"], results[1]["right"]
        ratio = f" = {on / off:.2f}x" if off else ""  # type: ignore[operator]
        print(f"right with / without: {on} / {off}{ratio}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"repo": str(args.repo), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
