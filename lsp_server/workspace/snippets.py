"""What other files lend a prompt: snippets that resemble the code being written, and the
definitions of the names it uses.

From the workspace index (BM25 windows of the repository's saved files, definitions read with
tree-sitter) and, like Copilot's neighbouring tabs and Continue's recently edited files, from the
other open documents' live text: split into line chunks, scored by identifier overlap (Jaccard)
with the block of the cursor, the best kept within a character budget. Chosen once per block.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lsp_server.config.tuning import (
    CHARS_PER_TOKEN,
    DEFINITION_SHARE_DIVISOR,
    REPO_SHARE_DIVISOR,
    SNIPPET_CHUNK_LINES,
    SNIPPET_MIN_SCORE,
    WINDOW_STEP_LINES,
)
from lsp_server.text.languages import DEFINED_HERE, IDENT
from lsp_server.text.uris import prompt_path
from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.snippet import Snippet


def identifiers(text: str) -> set[str]:
    return set(IDENT.findall(text))


def pick_snippets(
    query: str, others: Mapping[str, str], budget_chars: int, top: int = 2
) -> list[Snippet]:
    """Best-matching chunks of `others` (path -> text) for `query`, most similar last."""
    wanted = identifiers(query)
    if not wanted or budget_chars <= 0:
        return []
    scored: list[tuple[float, str, str]] = []
    for path, text in others.items():
        lines = text.split("\n")
        for start in range(0, len(lines), SNIPPET_CHUNK_LINES // 2):
            chunk = "\n".join(lines[start : start + SNIPPET_CHUNK_LINES]).strip("\n")
            ids = identifiers(chunk)
            if not ids:
                continue
            score = len(wanted & ids) / len(wanted | ids)
            if score >= SNIPPET_MIN_SCORE:
                scored.append((score, path, chunk))
    scored.sort(key=lambda s: -s[0])
    picked: list[Snippet] = []
    seen: set[str] = set()
    used = 0
    for _, path, chunk in scored:
        if chunk in seen or used + len(chunk) > budget_chars:
            continue
        seen.add(chunk)
        picked.append(Snippet(path, chunk))
        used += len(chunk)
        if len(picked) == top:
            break
    return picked[::-1]  # the best one nearest the code


def budget_chars(context_tokens: int) -> int:
    """How much text other files may lend a prompt of `context_tokens` tokens."""
    return context_tokens * CHARS_PER_TOKEN // REPO_SHARE_DIVISOR


@dataclass(frozen=True)
class RepoSources:
    """What may lend a prompt text from outside the document: other open documents (live text)
    and the workspace index (saved files), minus what the user excluded."""

    others: tuple[tuple[str, str], ...] = ()  # (uri, text)
    index: WorkspaceIndex | None = None
    exclusions: Exclusions | None = None
    definitions: bool = True  # the eval's ablations switch these off one by one
    index_snippets: bool = True


def definition_snippets(
    index: WorkspaceIndex, query: str, document: str, skip: set[str], budget_chars: int
) -> list[Snippet]:
    """Signatures and doc lines of the names `query` uses that the document does not define,
    grouped per file, as the prompt quotes other files."""
    names = [
        n
        for n in dict.fromkeys(IDENT.findall(query))
        if not re.search(DEFINED_HERE.format(re.escape(n)), document)
    ]
    by_path: dict[str, list[str]] = {}
    used = 0
    for found in index.definitions(names, skip=skip):
        lines = [found.signature] + ([f"    {found.doc}"] if found.doc else [])
        cost = sum(len(r) + 1 for r in lines)
        if used + cost > budget_chars:
            continue
        used += cost
        by_path.setdefault(found.path, []).extend(lines)
    return [Snippet(path, "\n".join(rows)) for path, rows in by_path.items()]


class SnippetChooser:
    """Snippets for a cursor, chosen once per block of lines around it so that the prompt's start
    stays put while the user types (KV reuse). Called from worker threads."""

    def __init__(self, budget_chars: Callable[[], int]) -> None:
        self.budget_chars = budget_chars
        self._chosen: dict[tuple, list[Snippet]] = {}
        self._lock = threading.Lock()

    def choose(self, uri: str, text: str, line: int, sources: RepoSources) -> list[Snippet]:
        index = sources.index
        excluded = sources.exclusions.excluded if sources.exclusions else (lambda _: False)
        others = tuple((u, t) for u, t in sources.others if not excluded(u))
        if not others and index is None:
            return []
        block = line // WINDOW_STEP_LINES
        key = (
            uri,
            block,
            tuple((u, hash(t)) for u, t in others),
            index.version if index is not None else None,
            sources.definitions,
            sources.index_snippets,
        )
        with self._lock:
            if key in self._chosen:
                return self._chosen[key]
        start = block * WINDOW_STEP_LINES
        query = "\n".join(text.split("\n")[start : start + WINDOW_STEP_LINES])
        budget = self.budget_chars()
        picked: list[Snippet] = []
        if index is not None:
            # Open documents lend their live text below; their saved copies would repeat it
            # (or, for this document, quote the line being written).
            skip = {r for u, _ in (*others, (uri, text)) if (r := index.relative(u))}
            if sources.definitions:
                defs = definition_snippets(
                    index, query, text, skip, budget // DEFINITION_SHARE_DIVISOR
                )
                budget -= sum(len(d.path) + len(d.text) for d in defs)
                picked.extend(defs)
            if sources.index_snippets:
                found = index.search(
                    query, budget_chars=budget // 2 if others else budget, skip=skip
                )
                budget -= sum(len(f.path) + len(f.text) for f in found)
                picked = found + picked  # definitions nearest the code
        if others:
            open_docs = {prompt_path(u): t for u, t in others}
            top = 1 if index is not None else 2
            picked = pick_snippets(query, open_docs, budget, top) + picked
        with self._lock:
            if len(self._chosen) > 64:
                self._chosen.clear()
            self._chosen[key] = picked
        return picked
