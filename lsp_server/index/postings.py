"""The search structure of the index: BM25 postings over windows of ~20 lines.

Each file's windows (term frequencies per window, window lengths) wait as "pending" until enough
accumulate, then merge into postings sorted by term (CSR): a search scores the query's terms'
postings with dense accumulators. Not thread-safe: WorkspaceIndex calls it under its lock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from inference.tuning import (
    INDEX_CANDIDATE_WINDOWS,
    INDEX_MERGE_FILES,
    INDEX_MERGE_PAIRS,
    INDEX_MIN_BM25,
    INDEX_MIN_MATCHED_TERMS,
    INDEX_REWEIGH_POSTINGS,
)
from lsp_server.index.files import NEWLINE, IndexLimits

K1, B = 1.2, 0.75


@dataclass(frozen=True, eq=False)
class Windows:
    """One file's windows: per (window, term) pair the term frequency, and each window's length
    in identifiers. Window numbers are the file's own (0, 1, ...)."""

    window: np.ndarray  # int32
    term: np.ndarray  # int32
    tf: np.ndarray  # uint16
    lengths: np.ndarray  # int32, one per window


@dataclass(frozen=True, eq=False)
class _Pending:
    """A file added since the last merge; its windows are numbered from `first`."""

    slot: int
    first: int
    windows: Windows


@dataclass(eq=False)
class _Merged:
    """Postings sorted by term (CSR): term t's windows are window[indptr[t]:indptr[t + 1]]."""

    indptr: np.ndarray  # int64, len = vocabulary size at the merge + 1
    window: np.ndarray  # int32
    tf: np.ndarray  # uint16
    # BM25's saturated term frequency (with the average window length at the merge): a search
    # only multiplies it by the idf.
    weight: np.ndarray  # float32
    slot: np.ndarray  # int32 per window: the file
    start: np.ndarray  # int32 per window: first line
    length: np.ndarray  # float32 per window
    alive: np.ndarray  # bool per window: False once its file is removed or re-indexed
    dead: int = 0

    @property
    def windows(self) -> int:
        return len(self.slot)

    @staticmethod
    def empty() -> _Merged:
        i32 = np.zeros(0, np.int32)
        return _Merged(
            np.zeros(1, np.int64),
            i32,
            np.zeros(0, np.uint16),
            np.zeros(0, np.float32),
            i32,
            i32,
            np.zeros(0, np.float32),
            np.zeros(0, bool),
        )


class Postings:
    def __init__(self, limits: IndexLimits) -> None:
        self._window_step = limits.window_step
        self.vocab: dict[str, int] = {"\n": NEWLINE}
        self._merged = _Merged.empty()
        self._pending: dict[int, _Pending] = {}  # by file slot; in order of `first`
        self._pending_pairs = 0
        self._range: dict[int, tuple[int, int]] = {}  # slot -> (first window, windows)
        self._next_window = 0
        self._live_windows = 0
        self._live_length = 0

    def remap(self, words: list[str]) -> np.ndarray:
        """Term ids of the index's vocabulary for `words` (added where new)."""
        vocab = self.vocab
        return np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.int32, len(words))

    def add(self, slot: int, windows: Windows) -> None:
        """Make a file's windows searchable (term ids already the vocabulary's)."""
        count = len(windows.lengths)
        self._pending[slot] = _Pending(slot, self._next_window, windows)
        self._range[slot] = (self._next_window, count)
        self._next_window += count
        self._pending_pairs += len(windows.term)
        self._live_windows += count
        self._live_length += int(windows.lengths.sum())
        waiting = max(INDEX_MERGE_PAIRS, len(self._merged.window))
        if self._pending_pairs >= waiting or len(self._pending) >= INDEX_MERGE_FILES:
            self.merge()

    def drop(self, slot: int) -> bool:
        """Take a file's windows out of what searches see; False when it had none."""
        if slot not in self._range:
            return False
        first, count = self._range.pop(slot)
        pending = self._pending.pop(slot, None)
        if pending is not None:
            self._pending_pairs -= len(pending.windows.term)
            length = int(pending.windows.lengths.sum())
        else:
            merged = self._merged
            merged.alive[first : first + count] = False
            merged.dead += count
            length = int(merged.length[first : first + count].sum())
        self._live_windows -= count
        self._live_length -= length
        return True

    def compact(self) -> None:
        """Merge once most merged windows belong to removed files."""
        merged = self._merged
        if merged.dead > merged.windows // 2 and merged.dead > 0:
            self.merge()

    def settle(self) -> None:
        """Merge what waits (the end of a build)."""
        if self._pending:
            self.merge()

    def merge(self) -> None:
        """Fold the pending files into the sorted postings, and drop the windows of removed
        files, renumbering the rest (under the index's lock).

        The merged postings are not sorted again: the pending ones are sorted and slotted in
        after each term's merged ones, and the weights computed in chunks, so that a merge needs
        about one more copy of the postings, not several (freed memory that the allocator keeps
        is RSS all the same)."""
        merged = self._merged
        window, tf, counts = merged.window, merged.tf, np.diff(merged.indptr)
        slots, starts, lengths = [merged.slot], [merged.start], [merged.length]
        if merged.dead:
            keep = merged.alive
            renumber = (np.cumsum(keep) - 1).astype(np.int32)
            live = keep[window]
            term = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
            counts = np.bincount(term[live], minlength=len(counts))
            del term
            window, tf = renumber[window[live]], tf[live]
            slots, starts, lengths = (
                [merged.slot[keep]],
                [merged.start[keep]],
                [merged.length[keep]],
            )
            for slot, (first, count) in self._range.items():
                if slot not in self._pending:
                    self._range[slot] = (int(renumber[first]), count)
        total = len(slots[0])
        step = self._window_step
        new_window, new_term, new_tf = [], [], []
        for slot, pending in self._pending.items():
            w = pending.windows
            count = len(w.lengths)
            new_window.append(w.window + np.int32(total))
            new_term.append(w.term)
            new_tf.append(w.tf)
            slots.append(np.full(count, slot, np.int32))
            starts.append(np.arange(count, dtype=np.int32) * step)
            lengths.append(w.lengths.astype(np.float32))
            self._range[slot] = (total, count)
            total += count
        vocab = len(self.vocab)
        indptr = np.zeros(vocab + 1, np.int64)
        np.cumsum(counts, out=indptr[1 : len(counts) + 1])
        indptr[len(counts) + 1 :] = indptr[len(counts)]
        if new_term:
            term = np.concatenate(new_term)
            order = np.argsort(term, kind="stable")
            term = term[order]
            # Each pending posting goes after the merged ones of its term (and the pending ones
            # before it).
            where = indptr[term + 1] + np.arange(len(term))
            is_new = np.zeros(len(window) + len(term), bool)
            is_new[where] = True
            is_old = ~is_new
            window = _interleave(window, np.concatenate(new_window)[order], is_old, is_new)
            tf = _interleave(tf, np.concatenate(new_tf)[order], is_old, is_new)
            indptr[1:] += np.cumsum(np.bincount(term, minlength=vocab))
        self._merged = _Merged(
            indptr,
            window,
            tf,
            np.empty(len(window), np.float32),
            np.concatenate(slots),
            np.concatenate(starts),
            np.concatenate(lengths),
            np.ones(total, bool),
        )
        self._reweigh()
        self._pending = {}
        self._pending_pairs = 0
        self._next_window = total

    def candidates(self, counts: Counter[str], skip: Iterable[int]) -> list[tuple[int, int]]:
        """The best-scoring windows as (file slot, first line), best first, none of the files
        in `skip` (under the index's lock)."""
        n = self._live_windows
        if n == 0:
            return []
        query = [(self.vocab[w], 1.0 + math.log(c)) for w, c in counts.items() if w in self.vocab]
        if len(query) < INDEX_MIN_MATCHED_TERMS:
            return []
        merged = self._merged
        pending = self._pending_postings([t for t, _ in query])
        ids, scores = [], []
        for term, weight in query:
            window, saturated = self._postings(merged, term)
            if term in pending:
                window = np.concatenate([window, pending[term][0]])
                saturated = np.concatenate([saturated, pending[term][1]])
            df = len(window)
            # A term in more than half the windows tells them apart no better than noise.
            if df == 0 or df > n / 2:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            ids.append(window)
            scores.append(saturated * np.float32(weight * idf))
        if not ids:
            return []
        # Dense accumulators over all window numbers: cheaper than sorting the postings.
        window = np.concatenate(ids)
        score = np.bincount(window, np.concatenate(scores), minlength=self._next_window)
        matched = np.bincount(window, minlength=self._next_window)
        for slot in skip:
            if slot in self._range:
                first, count = self._range[slot]
                score[first : first + count] = 0.0
        best = np.flatnonzero((matched >= INDEX_MIN_MATCHED_TERMS) & (score >= INDEX_MIN_BM25))
        if len(best) > INDEX_CANDIDATE_WINDOWS:
            best = best[
                np.argpartition(-score[best], INDEX_CANDIDATE_WINDOWS)[:INDEX_CANDIDATE_WINDOWS]
            ]
        best = best[np.argsort(-score[best], kind="stable")]
        slots, starts = self._locate(best)
        return list(zip(slots.tolist(), starts.tolist(), strict=True))

    def _reweigh(self) -> None:
        """The merged postings' saturated term frequencies for today's average window length
        (in chunks: the temporaries stay small)."""
        merged = self._merged
        average = self._average_length()
        for lo in range(0, len(merged.window), INDEX_REWEIGH_POSTINGS):
            hi = lo + INDEX_REWEIGH_POSTINGS
            merged.weight[lo:hi] = _saturation(
                merged.tf[lo:hi], merged.length[merged.window[lo:hi]], average
            )

    def _average_length(self) -> float:
        return max(self._live_length / max(self._live_windows, 1), 1.0)

    @staticmethod
    def _postings(merged: _Merged, term: int) -> tuple[np.ndarray, np.ndarray]:
        """A term's merged postings: (window, saturated term frequency)."""
        if term + 1 >= len(merged.indptr):
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        lo, hi = merged.indptr[term], merged.indptr[term + 1]
        window = merged.window[lo:hi]
        weight = merged.weight[lo:hi]
        if merged.dead:
            live = merged.alive[window]
            window, weight = window[live], weight[live]
        return window, weight

    def _pending_postings(self, terms: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The query terms' postings among the files not merged yet: term -> (window, saturated
        term frequency), windows numbered globally."""
        if not self._pending:
            return {}
        # All pending files at once (a few big numpy calls beat a few small ones per file), the
        # query's terms picked through a table over the vocabulary.
        blocks = [p.windows for p in self._pending.values()]
        sizes = np.array([len(b.term) for b in blocks])
        wanted = np.zeros(len(self.vocab), bool)
        wanted[terms] = True
        term = np.concatenate([b.term for b in blocks])
        hit = wanted[term]
        if not hit.any():
            return {}
        term = term[hit]
        local = np.concatenate([b.window for b in blocks])[hit]
        firsts = np.array([p.first for p in self._pending.values()], np.int64)
        window = local + np.repeat(firsts, sizes)[hit]
        # Each file's window lengths, found through where its windows begin among all of them.
        counts = np.array([len(b.lengths) for b in blocks])
        starts = np.repeat(np.cumsum(counts) - counts, sizes)[hit]
        length = np.concatenate([b.lengths for b in blocks])[starts + local]
        tf = np.concatenate([b.tf for b in blocks])[hit]
        saturated = _saturation(tf, length.astype(np.float32), self._average_length())
        order = np.argsort(term, kind="stable")
        term, window, saturated = term[order], window[order], saturated[order]
        bounds = np.flatnonzero(np.diff(term)) + 1
        out = {}
        for lo, hi in zip(
            np.concatenate([[0], bounds]).tolist(),
            np.concatenate([bounds, [len(term)]]).tolist(),
            strict=True,
        ):
            out[int(term[lo])] = (window[lo:hi].astype(np.int32), saturated[lo:hi])
        return out

    def _locate(self, windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """File slot and first line of each window (by its number; lock held)."""
        merged = self._merged
        slot = np.empty(len(windows), np.int64)
        start = np.empty(len(windows), np.int64)
        in_merged = windows < merged.windows
        slot[in_merged] = merged.slot[windows[in_merged]]
        start[in_merged] = merged.start[windows[in_merged]]
        rest = ~in_merged
        if rest.any():
            blocks = list(self._pending.values())
            firsts = np.array([b.first for b in blocks], np.int64)
            which = np.searchsorted(firsts, windows[rest], side="right") - 1
            slot[rest] = np.array([b.slot for b in blocks], np.int64)[which]
            start[rest] = (windows[rest] - firsts[which]) * self._window_step
        return slot, start


# -- windows and weights ----------------------------------------------------------------------


def windows_of(tokens: np.ndarray, line_counts: np.ndarray, limits: IndexLimits) -> Windows:
    """Windows of `window_lines` lines every `window_step` lines, the last one reaching the end:
    term frequencies per window and window lengths."""
    size, step = limits.window_lines, limits.window_step
    count = 1 + math.ceil(max(len(line_counts) - size, 0) / step)
    line = np.repeat(np.arange(len(line_counts), dtype=np.int64), line_counts)
    windows, terms = [], []
    # A line belongs to the windows starting at most `size - 1` lines above it.
    for back in range(math.ceil(size / step) + 1):
        window = line // step - back
        inside = (window >= 0) & (window < count) & (line < window * step + size)
        windows.append(window[inside])
        terms.append(tokens[inside])
    window = np.concatenate(windows)
    term = np.concatenate(terms).astype(np.int64)
    pairs, tf = np.unique((window << 32) | term, return_counts=True)
    return Windows(
        (pairs >> 32).astype(np.int32),
        (pairs & 0xFFFFFFFF).astype(np.int32),
        np.minimum(tf, 0xFFFF).astype(np.uint16),
        np.bincount(window, minlength=count).astype(np.int32),
    )


def _interleave(
    old: np.ndarray, new: np.ndarray, is_old: np.ndarray, is_new: np.ndarray
) -> np.ndarray:
    out = np.empty(len(is_old), old.dtype)
    out[is_old] = old
    out[is_new] = new
    return out


def _saturation(tf: np.ndarray, length: np.ndarray, average_length: float) -> np.ndarray:
    """BM25's term-frequency part: tf (k1 + 1) / (tf + k1 (1 - b + b |window| / avg))."""
    tf = tf.astype(np.float32)
    return (
        tf * np.float32(K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / np.float32(average_length)))
    )
