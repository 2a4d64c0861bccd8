"""What the person just edited, across the workspace's files, for the prompt (as Copilot, Zed,
Cody and Continue put recent edits in theirs): a renamed parameter, a new field or a changed
signature is then known at the next place that depends on it, before it is saved or indexed.

Each edit joins the hunk being written when it lands within a few lines of it; an edit anywhere
else closes that hunk, whose lines are then kept as they read, with the lines that enclose them
(by indentation). A prompt quotes the most recent few as snippets of their files, nearest the
code, leaving out the ones its window already shows. A closed hunk never changes, and the hunk
being typed at the cursor is left out, so the prompt's start stays put while the person types
(KV reuse); it moves once, when they start editing somewhere else.
"""

from __future__ import annotations

import keyword
import re
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from lsp_server.config.tuning import (
    RECENT_EDIT_CONTEXT_LINES,
    RECENT_EDIT_ENCLOSING_LINES,
    RECENT_EDIT_MAX_CHARS,
    RECENT_EDIT_MERGE_LINES,
    RECENT_EDIT_NEAR_LINES,
    RECENT_EDITS_IN_PROMPT,
    RECENT_EDITS_KEPT,
    TREE_MAX_CHARS,
)
from lsp_server.text.languages import IDENT
from lsp_server.text.uris import prompt_path
from lsp_server.workspace.snippet import Snippet

WORD = re.compile(r"\w+")  # whole words, so that counting `name` does not count `names`


@dataclass(frozen=True)
class Hunk:
    """Lines [first, last] of a document that the person edited (as numbered now)."""

    uri: str
    first: int
    last: int
    text: str = ""  # the lines as they read when the hunk closed, with their enclosing lines
    names: tuple[str, ...] = ()  # identifiers its lines brought in: the document has no others
    old_names: frozenset[str] = frozenset()  # identifiers of the lines it replaced


@dataclass(frozen=True)
class Recent:
    """What a prompt gets of the recent edits."""

    snippets: tuple[Snippet, ...] = ()
    names: tuple[str, ...] = ()  # names they introduced, most recent first


def shifted(hunk: Hunk, first: int, old_last: int, new_last: int) -> Hunk:
    """`hunk` after lines [first, old_last] of its document became lines [first, new_last]."""
    if hunk.last < first:
        return hunk
    delta = new_last - old_last
    if hunk.first > old_last:
        return replace(hunk, first=hunk.first + delta, last=hunk.last + delta)
    return replace(hunk, first=min(hunk.first, first), last=max(hunk.last + delta, new_last))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def hunk_text(text: str, first: int, last: int) -> str:
    """Lines [first, last] of `text` with RECENT_EDIT_CONTEXT_LINES around them, preceded by the
    lines that enclose them (each less indented than the one below it: the class and the def a
    new field or parameter belongs to), cut at RECENT_EDIT_MAX_CHARS; "" when all blank."""
    lines = text.split("\n")
    lo = max(0, first - RECENT_EDIT_CONTEXT_LINES)
    hi = min(len(lines), last + 1 + RECENT_EDIT_CONTEXT_LINES)
    body = lines[lo:hi]
    if not "".join(body).strip():
        return ""
    enclosing: list[str] = []
    inner = min((_indent(r) for r in body if r.strip()), default=0)
    row = lo - 1
    while row >= 0 and inner > 0 and len(enclosing) < RECENT_EDIT_ENCLOSING_LINES:
        if lines[row].strip() and _indent(lines[row]) < inner:
            enclosing.append(lines[row])
            inner = _indent(lines[row])
        row -= 1
    quoted = "\n".join([*enclosing[::-1], *body]).strip("\n")
    if len(quoted) <= RECENT_EDIT_MAX_CHARS:
        return quoted
    return quoted[:RECENT_EDIT_MAX_CHARS].rsplit("\n", 1)[0]


def line_names(text: str, first: int, last: int) -> frozenset[str]:
    """The identifiers of lines [first, last] of `text` (none when last < first)."""
    if last < first:
        return frozenset()
    start = 0
    for _ in range(first):
        start = text.find("\n", start) + 1
        if start == 0:
            return frozenset()
    end = start
    for _ in range(last - first + 1):
        end = text.find("\n", end) + 1
        if end == 0:
            end = len(text)
            break
    return frozenset(IDENT.findall(text, start, end))


def introduced(hunk: Hunk, text: str) -> tuple[str, ...]:
    """Identifiers the hunk's lines brought in: not in the lines it replaced, nor anywhere else
    in `text` (a new field, a renamed parameter, a new function; not a built-in used around).
    Only those in its first RECENT_EDIT_MAX_CHARS are looked at; two linear passes in all (a
    whole document sent again is one hunk)."""
    lines = "\n".join(text.split("\n")[hunk.first : hunk.last + 1])
    here = Counter(WORD.findall(lines))
    everywhere = Counter(WORD.findall(text))
    return tuple(
        name
        for name in dict.fromkeys(IDENT.findall(lines[:RECENT_EDIT_MAX_CHARS]))
        if name not in hunk.old_names
        and not keyword.iskeyword(name)
        and everywhere[name] == here[name]
    )


def frozen(hunk: Hunk, text: str) -> Hunk:
    """`hunk` with its quoted text and the names it introduced, as `text` reads now."""
    quoted = hunk_text(text, hunk.first, hunk.last)
    names = introduced(hunk, text) if quoted else ()
    return replace(hunk, text=quoted, names=names)


class RecentEdits:
    """The workspace's recent edits. Edits arrive on the event loop; prompts are planned on
    worker threads."""

    def __init__(self, text_of: Callable[[str], str | None]) -> None:
        self._text_of = text_of  # a document's live text (None once it is closed)
        self._closed: deque[Hunk] = deque(maxlen=RECENT_EDITS_KEPT)
        self._open: Hunk | None = None
        self._lock = threading.Lock()

    def edited(self, uri: str, before: str, start: int, end: int, inserted: str) -> None:
        """[start, end) of `uri`'s text `before` was replaced by `inserted`."""
        if len(before) > TREE_MAX_CHARS:
            return  # a document this large is seen around the cursor only (planner)
        first = before.count("\n", 0, start)
        old_last = first + before.count("\n", start, end)
        new_last = first + inserted.count("\n")
        with self._lock:
            hunk = self._open
            if hunk is not None and not (
                hunk.uri == uri
                and first <= hunk.last + RECENT_EDIT_MERGE_LINES
                and old_last >= hunk.first - RECENT_EDIT_MERGE_LINES
            ):
                self._close(hunk, before if hunk.uri == uri else self._text_of(hunk.uri))
                hunk = None
            self._closed = deque(
                (
                    shifted(h, first, old_last, new_last) if h.uri == uri else h
                    for h in self._closed
                ),
                maxlen=RECENT_EDITS_KEPT,
            )
            if hunk is None:
                self._open = Hunk(
                    uri, first, new_last, old_names=line_names(before, first, old_last)
                )
            else:
                # The lines it pulls in that were not part of it yet read as they did before.
                low, high = min(first, hunk.first), max(old_last, hunk.last)
                pulled = line_names(before, low, hunk.first - 1) | line_names(
                    before, hunk.last + 1, high
                )
                grown = shifted(hunk, first, old_last, new_last)
                self._open = replace(
                    grown,
                    first=min(grown.first, first),
                    last=max(grown.last, new_last),
                    old_names=hunk.old_names | pulled,
                )

    def _close(self, hunk: Hunk, text: str | None) -> None:
        if text is None:
            return
        hunk = frozen(hunk, text)
        if not hunk.text:
            return
        kept = [
            h
            for h in self._closed
            if not (h.uri == hunk.uri and h.first <= hunk.last and h.last >= hunk.first)
        ]
        self._closed = deque([*kept, hunk], maxlen=RECENT_EDITS_KEPT)

    def recent(self, uri: str, line: int) -> Recent:
        """The most recent few edits as snippets, oldest first, and the names they introduced
        (most recent first), for a prompt at `line` of `uri`: those of this document that its
        window shows (near `line`) left out."""

        def shown_there(h: Hunk) -> bool:  # by the window, or being written at the cursor
            near = (
                line - RECENT_EDIT_NEAR_LINES <= h.last
                and h.first <= line + RECENT_EDIT_MERGE_LINES
            )
            return h.uri == uri and near

        with self._lock:
            picked = [h for h in self._closed if not shown_there(h)]
            hunk = self._open
        if hunk is not None and not shown_there(hunk):
            text = self._text_of(hunk.uri)
            if text is not None and (hunk := frozen(hunk, text)).text:
                picked.append(hunk)
        picked = picked[-RECENT_EDITS_IN_PROMPT:]
        names = dict.fromkeys(n for h in reversed(picked) for n in h.names)
        return Recent(tuple(Snippet(prompt_path(h.uri), h.text) for h in picked), tuple(names))

    def forget(self, uri: str) -> None:
        """A closed document: its hunks stay (recent edits outlive the tab), read no more live."""
        with self._lock:
            hunk = self._open
            if hunk is not None and hunk.uri == uri:
                self._close(hunk, self._text_of(uri))
                self._open = None
