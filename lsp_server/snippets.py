"""Snippets from other recently used files that resemble the code being written.

Like Copilot's neighbouring tabs and Continue's recently edited files: split each other file into
line chunks, score them by identifier overlap (Jaccard) with the text near the cursor, keep the
best few within a character budget, deduplicated.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping

from lsp_server.context import Snippet, prompt_path

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
CHUNK_LINES = 24
MIN_SCORE = 0.12


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
        for start in range(0, len(lines), CHUNK_LINES // 2):
            chunk = "\n".join(lines[start : start + CHUNK_LINES]).strip("\n")
            ids = identifiers(chunk)
            if not ids:
                continue
            score = len(wanted & ids) / len(wanted | ids)
            if score >= MIN_SCORE:
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


class SnippetChooser:
    """Snippets for a cursor, chosen once per block of lines around it so that the prompt's start
    stays put while the user types (KV reuse). Called from worker threads."""

    BLOCK_LINES = 64

    def __init__(self, budget_chars: Callable[[], int]) -> None:
        self.budget_chars = budget_chars
        self._chosen: dict[tuple, list[Snippet]] = {}
        self._lock = threading.Lock()

    def choose(
        self, uri: str, text: str, line: int, others: tuple[tuple[str, str], ...]
    ) -> list[Snippet]:
        """`others`: (uri, text) of the other documents that may lend snippets."""
        if not others:
            return []
        block = line // self.BLOCK_LINES
        key = (uri, block, tuple((u, hash(t)) for u, t in others))
        with self._lock:
            if key in self._chosen:
                return self._chosen[key]
        start = block * self.BLOCK_LINES
        query = "\n".join(text.split("\n")[start : start + self.BLOCK_LINES])
        sources = {prompt_path(u): t for u, t in others}
        picked = pick_snippets(query, sources, self.budget_chars())
        with self._lock:
            if len(self._chosen) > 64:
                self._chosen.clear()
            self._chosen[key] = picked
        return picked
