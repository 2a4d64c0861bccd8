"""Retention: how much of an accepted suggestion is still in the document a while later (30 s
and 120 s, as Copilot measures it). Accepting and then rewriting a suggestion is a miss that
acceptance counts alone hide. Counted locally; nothing leaves the machine.

Each accepted text is tracked as a span of its document; edits before it shift the span, edits
inside it stretch or shrink it. At each check the span's current text is compared with what was
accepted: the characters of the accepted text still there, in order, are retained.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass
class Accepted:
    """An accepted text and where it lies now (character offsets into its document)."""

    uri: str
    start: int
    end: int
    text: str
    kind: str  # "full" | "word" | "line"
    # The editor's edit had not reached us when the accept did: the next edit at `start` is it.
    arriving: bool = False


def edited_span(span: tuple[int, int], start: int, end: int, inserted: int) -> tuple[int, int]:
    """`span` after [start, end) was replaced by `inserted` characters."""
    low, high = span
    delta = inserted - (end - start)
    if end <= low:  # before it, an insertion right at its start included
        return low + delta, high + delta
    if start >= high:  # after it
        return low, high
    new_low = min(low, start)
    new_high = high + delta if end <= high else start + inserted
    return new_low, max(new_low, new_high)


def retained_chars(accepted: str, now: str) -> int:
    """The characters of `accepted` still present, in order, in `now`."""
    matcher = SequenceMatcher(None, accepted, now, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


class RetentionTracker:
    """Accepted texts being watched, per document."""

    def __init__(self) -> None:
        self._watched: list[Accepted] = []

    def __len__(self) -> int:
        return len(self._watched)

    def track(self, uri: str, text_now: str, start: int, accepted: str, kind: str) -> Accepted:
        """Watch `accepted`, placed at `start`. The editor's edit may not have reached us yet
        (the accept command and the didChange race): then the span starts empty and the
        next edit at `start` fills it (an insertion, or the typed prefix of a suggest widget's
        item replaced by the accepted text)."""
        there = text_now[start : start + len(accepted)] == accepted
        end = start + len(accepted) if there else start
        entry = Accepted(uri, start, end, accepted, kind, arriving=not there)
        self._watched.append(entry)
        return entry

    def edited(self, uri: str, start: int, end: int, inserted: int) -> None:
        for entry in self._watched:
            if entry.uri != uri:
                continue
            if entry.arriving and start == entry.start:
                entry.end, entry.arriving = start + inserted, False
            else:
                entry.start, entry.end = edited_span((entry.start, entry.end), start, end, inserted)

    def measure(self, entry: Accepted, text_now: str) -> int:
        return retained_chars(entry.text, text_now[entry.start : entry.end])

    def forget(self, entry: Accepted) -> None:
        self._watched = [watched for watched in self._watched if watched is not entry]

    def watching(self, entry: Accepted) -> bool:
        return any(watched is entry for watched in self._watched)

    def closed(self, uri: str) -> None:
        """A closed document can no longer be measured: its entries are dropped."""
        self._watched = [entry for entry in self._watched if entry.uri != uri]
