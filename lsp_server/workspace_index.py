"""An index of the workspace's source files for the prompt: BM25 over ~20-line windows (code that
resembles the code being written) and the definitions of named functions and types.

Built on a background thread, searched from request threads while it grows. Each file keeps its
identifier stream (term ids with per-line counts): enough to rebuild its windows, so the stored
index (JSON under `store_dir`) lets a restart re-read only the files that changed. Windows' text
is not kept: the few picked ones are read from disk when a search returns them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsp_server.context import Snippet
from lsp_server.definitions import Definition, extract_definitions
from lsp_server.exclusions import SKIPPED_DIRS, Exclusions, relative_path
from lsp_server.syntax import EXTENSIONS

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
IDENT_OR_NEWLINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}|\n")
NEWLINE = 0  # the vocabulary's term 0 is "\n": a file's stream marks its line ends with it
K1, B = 1.2, 0.75
# A window needs two distinct query terms (one shared name is chance) and this much BM25 score.
MIN_MATCHED_TERMS = 2
MIN_SCORE = 2.0
CANDIDATES = 64  # best windows considered when picking (overlaps, skips and budget drop some)
BINARY_PROBE = 8192
AMBIGUOUS = 3  # a name defined in more places than this says nothing about which one is meant
# Files added are merged into the sorted postings once they hold this many (window, term) pairs
# or as many as the merged part (each merge copies the merged postings: doubling keeps a build's
# copies linear in all), or once this many files wait (a search scans each of them).
MERGE_PAIRS = 50_000
MERGE_FILES = 256
REWEIGH_CHUNK = 1 << 18  # postings reweighed at a time after a merge

# Languages with a grammar (definitions and snippets); other source files lend snippets only.
LANGUAGES: dict[str, str] = {
    **EXTENSIONS,
    ".pyi": "python",
    ".cjs": "javascript",
    ".mts": "typescript",
    ".cts": "typescript",
}
TEXT_SOURCES = frozenset(
    {
        *(".java", ".kt", ".kts", ".scala", ".groovy", ".cs", ".fs", ".swift", ".dart", ".m"),
        *(".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".mm", ".zig", ".nim"),
        *(".rb", ".php", ".lua", ".pl", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj"),
        *(".sh", ".bash", ".zsh", ".ps1", ".sql", ".vue", ".svelte"),
    }
)
SOURCE_EXTENSIONS = frozenset(LANGUAGES) | TEXT_SOURCES


@dataclass(frozen=True)
class IndexLimits:
    max_files: int = 5000
    max_file_bytes: int = 256_000
    window_lines: int = 20
    window_step: int = 10


DEFAULT_LIMITS = IndexLimits()


@dataclass(frozen=True)
class IndexReport:
    files: int  # in the index after the build
    reused: int  # unchanged since the last build or the stored index: not read
    read: int
    skipped: int  # source files left out: excluded, gitignored, too big, binary, unreadable
    seconds: float
    truncated: bool  # max_files reached: the rest of the tree is not indexed


@dataclass(frozen=True, eq=False)
class _FileRecord:
    rel: str
    mtime_ns: int
    size: int
    tokens: np.ndarray  # int32 term ids of the identifiers, in order
    line_counts: np.ndarray  # uint32: how many of them each line holds
    definitions: tuple[Definition, ...]


@dataclass(frozen=True, eq=False)
class _Windows:
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
    windows: _Windows


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


@dataclass(frozen=True, eq=False)
class _Parsed:
    """A file read and tokenized (term ids local to it: `words`), before it joins the index."""

    rel: str
    mtime_ns: int
    size: int
    words: list[str] | None  # None: the term ids are the index's already
    tokens: np.ndarray
    line_counts: np.ndarray
    windows: _Windows
    definitions: tuple[Definition, ...]


@dataclass(frozen=True, eq=False)
class _Store:
    """The stored index: every file's term ids (of `vocab`) and line counts in two arrays, each
    file's entry saying where its own lie."""

    vocab: list[str]
    files: dict[str, Any]
    tokens: np.ndarray  # int32
    lines: np.ndarray  # uint32


class WorkspaceIndex:
    def __init__(
        self,
        root: Path,
        store_dir: Path | None,
        limits: IndexLimits = DEFAULT_LIMITS,
        exclusions: Exclusions | None = None,
    ) -> None:
        self.root = root.resolve()
        self._roots = tuple(
            dict.fromkeys((Path(os.path.abspath(root)).as_posix(), self.root.as_posix()))
        )
        self.limits = limits
        self.exclusions = exclusions if exclusions is not None else Exclusions(self.root)
        digest = hashlib.sha1(str(self.root).encode("utf-8")).hexdigest()
        self.store_path = store_dir / f"{digest}.json" if store_dir is not None else None
        self._lock = threading.Lock()
        self._vocab: dict[str, int] = {"\n": NEWLINE}
        self._records: list[_FileRecord | None] = []
        self._slot_of: dict[str, int] = {}
        self._range: dict[int, tuple[int, int]] = {}  # slot -> (first window, windows)
        self._merged = _Merged.empty()
        self._pending: dict[int, _Pending] = {}  # by slot; in order of `first`
        self._pending_pairs = 0
        self._next_window = 0
        self._live_windows = 0
        self._live_length = 0
        self._by_name: dict[str, list[Definition]] = {}
        self._version = 0
        self._dirty = False  # differs from the stored index

    # -- what callers ask -------------------------------------------------------------------

    @property
    def file_count(self) -> int:
        with self._lock:
            return len(self._slot_of)

    @property
    def version(self) -> int:
        """Changes whenever a file joins or leaves the index (callers key caches on it)."""
        with self._lock:
            return self._version

    def relative(self, path_or_uri: str | Path) -> str | None:
        """The path relative to the root with "/", for a file under the root; else None."""
        return relative_path(path_or_uri, self._roots)

    def search(
        self, query: str, *, budget_chars: int, top: int = 2, skip: Collection[str] = ()
    ) -> list[Snippet]:
        """The windows most like `query` (BM25 over identifiers), never two that overlap, within
        `budget_chars` of text, best last (nearest the code in the prompt)."""
        if budget_chars <= 0 or top <= 0:
            return []
        counts = Counter(IDENT.findall(query))
        if len(counts) < MIN_MATCHED_TERMS:
            return []
        with self._lock:
            candidates = self._candidates(counts, set(skip))
        picked: list[Snippet] = []
        taken: list[tuple[str, int]] = []
        lines_of: dict[str, list[str] | None] = {}
        used = 0
        for rel, start in candidates:
            window = self.limits.window_lines
            if any(r == rel and abs(s - start) < window for r, s in taken):
                continue
            if rel not in lines_of:
                lines_of[rel] = self._lines(rel)
            lines = lines_of[rel]
            if lines is None:
                continue
            text = _strip_blank_lines(lines[start : start + window])
            if not text or used + len(text) > budget_chars or any(p.text == text for p in picked):
                continue
            picked.append(Snippet(rel, text))
            taken.append((rel, start))
            used += len(text)
            if len(picked) == top:
                break
        return picked[::-1]

    def definitions(
        self, names: Iterable[str], *, skip: Collection[str] = (), limit: int = 8
    ) -> list[Definition]:
        """Definitions of `names`, in their order: first one per name (types and functions
        before methods), then the other places a name is defined, up to `limit`."""
        first: list[Definition] = []
        more: list[Definition] = []
        with self._lock:
            for name in dict.fromkeys(names):
                found = [d for d in self._by_name.get(name, ()) if d.path not in skip]
                if not found or len(found) > AMBIGUOUS:
                    continue
                found.sort(key=lambda d: (d.kind == "method", d.path, d.line))
                first.append(found[0])
                more.extend(found[1:])
                if len(first) >= limit:
                    break
        return (first + more)[:limit]

    # -- building and keeping it current ----------------------------------------------------

    def build(
        self,
        progress: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> IndexReport:
        """Index the tree: files unchanged since the last build (or the stored index) are not
        read again; files gone since are dropped. `cancel` stops it between files (what is
        indexed so far stays searchable; nothing is stored)."""
        began = time.perf_counter()
        files, skipped, truncated = self._walk()
        store: _Store | None = None
        store_loaded = False
        remap: np.ndarray | None = None
        reused = read = 0
        seen: set[str] = set()
        for done, (rel, path, mtime_ns, size) in enumerate(files, 1):
            if cancel is not None and cancel.is_set():
                break
            seen.add(rel)
            with self._lock:
                slot = self._slot_of.get(rel)
                current = self._records[slot] if slot is not None else None
            if _unchanged(current, mtime_ns, size):
                reused += 1
            else:
                if not store_loaded:
                    store, store_loaded = self._load_store(), True
                parsed = None
                entry = store.files.get(rel) if store is not None else None
                if store is not None and _entry_matches(entry, mtime_ns, size):
                    if remap is None:
                        remap = self._remap(store.vocab)
                    parsed = _from_store(rel, entry, store, remap, self.limits)
                if parsed is not None:
                    reused += 1
                else:
                    parsed = self._read(rel, path, mtime_ns, size)
                    if parsed is None:
                        skipped += 1
                        self._remove(rel)
                    else:
                        read += 1
                        self._dirty = True
                if parsed is not None:
                    self._add(parsed)
            if progress is not None:
                progress(done, len(files))
        cancelled = cancel is not None and cancel.is_set()
        if not cancelled:
            with self._lock:
                gone = [rel for rel in self._slot_of if rel not in seen]
            for rel in gone:
                self._remove(rel)
            with self._lock:
                indexed = set(self._slot_of)
            # (Not loaded: every file was indexed here already, and `_dirty` knows the rest.)
            if store_loaded and (store is None or set(store.files) != indexed):
                self._dirty = True
        with self._lock:
            if self._pending:
                self._merge()
        if not cancelled and self._dirty:
            self.save()
        return IndexReport(
            files=self.file_count,
            reused=reused,
            read=read,
            skipped=skipped,
            seconds=time.perf_counter() - began,
            truncated=truncated,
        )

    def update(self, path: Path) -> None:
        """(Re)index one file after it changed; drop it if it is gone, excluded, ignored, too
        big or binary."""
        rel = self.relative(path)
        if rel is None:
            return
        full = self.root / rel
        try:
            stat = full.stat()
        except OSError:
            self.remove(full)  # (a deleted folder: the files in it)
            return
        if (
            not full.is_file()
            or any(part in SKIPPED_DIRS for part in rel.split("/")[:-1])
            or os.path.splitext(rel)[1].lower() not in SOURCE_EXTENSIONS
            or stat.st_size > self.limits.max_file_bytes
            or self.exclusions.excluded(full)
            or self.exclusions.ignored(full)
        ):
            self._remove(rel)
            return
        with self._lock:
            slot = self._slot_of.get(rel)
            current = self._records[slot] if slot is not None else None
            if current is None and len(self._slot_of) >= self.limits.max_files:
                return
        if _unchanged(current, stat.st_mtime_ns, stat.st_size):
            return
        parsed = self._read(rel, full, stat.st_mtime_ns, stat.st_size)
        if parsed is None:
            self._remove(rel)
        else:
            self._add(parsed)
            self._dirty = True

    def remove(self, path: Path) -> None:
        """Drop a file, or every file in a folder."""
        rel = self.relative(path)
        if rel is None:
            return
        with self._lock:
            below = [r for r in self._slot_of if r.startswith(rel + "/")]
        for r in [rel, *below]:
            self._remove(r)

    def save(self) -> None:
        """Write the index under `store_dir` (atomically: the folder may be shared)."""
        if self.store_path is None:
            return
        with self._lock:
            records = [r for r in self._records if r is not None]
            vocab = list(self._vocab)  # insertion order is id order
        # Two arrays for all files rather than one string per file: loading makes two big
        # allocations instead of thousands that fragment the heap.
        files: dict[str, Any] = {}
        tokens_at = lines_at = 0
        for r in records:
            files[r.rel] = _entry(r, tokens_at, lines_at)
            tokens_at += len(r.tokens)
            lines_at += len(r.line_counts)
        payload = {
            "version": FORMAT_VERSION,
            "root": str(self.root),
            "vocab": vocab,
            "tokens": _pack([r.tokens for r in records], "<i4"),
            "lines": _pack([r.line_counts for r in records], "<u4"),
            "files": files,
        }
        folder = self.store_path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=self.store_path.stem, suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    # dumps, not dump: dump encodes in Python, several times slower.
                    out.write(json.dumps(payload, separators=(",", ":")))
                os.replace(tmp, self.store_path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            log.warning("could not store the index of %s", self.root, exc_info=True)
            return
        self._dirty = False

    # -- files ------------------------------------------------------------------------------

    def _walk(self) -> tuple[list[tuple[str, Path, int, int]], int, bool]:
        """Source files to index, breadth first (files near the root first when the limit
        cuts), as (relative path, path, mtime_ns, size); files skipped; whether cut."""
        found: list[tuple[str, Path, int, int]] = []
        skipped = 0
        folders: deque[tuple[Path, str]] = deque([(self.root, "")])
        while folders:
            folder, prefix = folders.popleft()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                # Symlinks could lead out of the root (or around in circles): never followed.
                if entry.is_symlink():
                    continue
                path = Path(entry.path)
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not (
                        entry.name in SKIPPED_DIRS
                        or self.exclusions.excluded(path, is_dir=True)
                        or self.exclusions.ignored(path, is_dir=True)
                    ):
                        folders.append((path, rel + "/"))
                    continue
                if os.path.splitext(entry.name)[1].lower() not in SOURCE_EXTENSIONS:
                    continue
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (
                    stat.st_size > self.limits.max_file_bytes
                    or self.exclusions.excluded(path, is_dir=False)
                    or self.exclusions.ignored(path, is_dir=False)
                ):
                    skipped += 1
                    continue
                if len(found) == self.limits.max_files:
                    return found, skipped, True
                found.append((rel, path, stat.st_mtime_ns, stat.st_size))
        return found, skipped, False

    def _read(self, rel: str, path: Path, mtime_ns: int, size: int) -> _Parsed | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) > self.limits.max_file_bytes or b"\0" in data[:BINARY_PROBE]:
            return None
        text = data.decode("utf-8", "replace")
        words: dict[str, int] = {"\n": NEWLINE}
        stream = np.fromiter(
            (words.setdefault(w, len(words)) for w in IDENT_OR_NEWLINE.findall(text)), np.int32
        )
        tokens, line_counts = _split_lines(stream)
        language = LANGUAGES.get(os.path.splitext(rel)[1].lower())
        return _Parsed(
            rel,
            mtime_ns,
            size,
            list(words),
            tokens,
            line_counts,
            _windows(tokens, line_counts, self.limits),
            extract_definitions(language, text, rel) if language else (),
        )

    def _lines(self, rel: str) -> list[str] | None:
        """A file's lines, read for the windows a search picked (None: gone, or excluded since
        it was indexed)."""
        path = self.root / rel
        if self.exclusions.excluded(path):
            return None
        try:
            # Bytes, not read_text: its universal newlines would count a lone "\r" as a line.
            return path.read_bytes().decode("utf-8", "replace").split("\n")
        except OSError:
            return None

    # -- the shared state (under the lock) --------------------------------------------------

    def _remap(self, words: list[str]) -> np.ndarray:
        """Term ids of the index's vocabulary for `words` (added where new)."""
        with self._lock:
            vocab = self._vocab
            return np.fromiter(
                (vocab.setdefault(w, len(vocab)) for w in words), np.int32, len(words)
            )

    def _add(self, parsed: _Parsed) -> None:
        """Make a file searchable: its terms join the vocabulary, its windows the pending ones
        (merged into the sorted postings now and then)."""
        to_global = self._remap(parsed.words) if parsed.words is not None else None
        windows = parsed.windows
        tokens = parsed.tokens
        if to_global is not None:
            windows = _Windows(windows.window, to_global[windows.term], windows.tf, windows.lengths)
            tokens = to_global[tokens]
        record = _FileRecord(
            parsed.rel,
            parsed.mtime_ns,
            parsed.size,
            tokens,
            parsed.line_counts,
            parsed.definitions,
        )
        with self._lock:
            self._drop(parsed.rel)
            slot = self._slot_of.get(parsed.rel)
            if slot is None:
                slot = len(self._records)
                self._records.append(record)
            else:
                self._records[slot] = record
            self._slot_of[parsed.rel] = slot
            count = len(windows.lengths)
            self._pending[slot] = _Pending(slot, self._next_window, windows)
            self._range[slot] = (self._next_window, count)
            self._next_window += count
            self._pending_pairs += len(windows.term)
            self._live_windows += count
            self._live_length += int(windows.lengths.sum())
            for definition in record.definitions:
                self._by_name.setdefault(definition.name, []).append(definition)
            self._version += 1
            waiting = max(MERGE_PAIRS, len(self._merged.window))
            if self._pending_pairs >= waiting or len(self._pending) >= MERGE_FILES:
                self._merge()

    def _remove(self, rel: str) -> None:
        with self._lock:
            slot = self._slot_of.pop(rel, None)
            if slot is None:
                return
            self._drop(rel, slot)
            self._records[slot] = None
            self._dirty = True
            merged = self._merged
            if merged.dead > merged.windows // 2 and merged.dead > 0:
                self._merge()

    def _drop(self, rel: str, slot: int | None = None) -> None:
        """Take a file's windows and definitions out of what searches see (lock held)."""
        slot = self._slot_of.get(rel) if slot is None else slot
        if slot is None or slot not in self._range:
            return
        record = self._records[slot]
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
        if record is not None:
            for definition in record.definitions:
                same = self._by_name.get(definition.name, [])
                if definition in same:
                    same.remove(definition)
                if not same:
                    self._by_name.pop(definition.name, None)
        self._version += 1

    def _merge(self) -> None:
        """Fold the pending files into the sorted postings, and drop the windows of removed
        files, renumbering the rest (lock held).

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
        step = self.limits.window_step
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
        vocab = len(self._vocab)
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

    def _candidates(self, counts: Counter[str], skip: set[str]) -> list[tuple[str, int]]:
        """The best-scoring windows as (relative path, first line), best first (lock held)."""
        n = self._live_windows
        if n == 0:
            return []
        query = [(self._vocab[w], 1.0 + math.log(c)) for w, c in counts.items() if w in self._vocab]
        if len(query) < MIN_MATCHED_TERMS:
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
        for rel in skip:
            slot = self._slot_of.get(rel)
            if slot is not None and slot in self._range:
                first, count = self._range[slot]
                score[first : first + count] = 0.0
        best = np.flatnonzero((matched >= MIN_MATCHED_TERMS) & (score >= MIN_SCORE))
        if len(best) > CANDIDATES:
            best = best[np.argpartition(-score[best], CANDIDATES)[:CANDIDATES]]
        best = best[np.argsort(-score[best], kind="stable")]
        slots, starts = self._locate(best)
        out = []
        for slot, start in zip(slots.tolist(), starts.tolist(), strict=True):
            record = self._records[slot]
            if record is not None:
                out.append((record.rel, start))
        return out

    def _reweigh(self) -> None:
        """The merged postings' saturated term frequencies for today's average window length
        (in chunks: the temporaries stay small)."""
        merged = self._merged
        average = self._average_length()
        for lo in range(0, len(merged.window), REWEIGH_CHUNK):
            hi = lo + REWEIGH_CHUNK
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
        wanted = np.zeros(len(self._vocab), bool)
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
            start[rest] = (windows[rest] - firsts[which]) * self.limits.window_step
        return slot, start

    # -- the stored index -------------------------------------------------------------------

    def _load_store(self) -> _Store | None:
        """The stored index, or None when there is none or it is unreadable, of another format
        or another root (then it is rebuilt)."""
        if self.store_path is None:
            return None
        try:
            data = json.loads(self.store_path.read_bytes())
            if (
                not isinstance(data, dict)
                or data.get("version") != FORMAT_VERSION
                or data.get("root") != str(self.root)
                or not isinstance(data.get("files"), dict)
                or not isinstance(data.get("vocab"), list)
                or not all(isinstance(w, str) for w in data["vocab"])
                or data["vocab"][:1] != ["\n"]
            ):
                return None
            tokens = _unpack(data["tokens"], "<i4")
            lines = _unpack(data["lines"], "<u4")
            if len(tokens) and (tokens.min() < 0 or tokens.max() >= len(data["vocab"])):
                return None
        except (OSError, KeyError, TypeError, ValueError, zlib.error):
            return None
        return _Store(data["vocab"], data["files"], tokens, lines)


# -- tokens and windows ---------------------------------------------------------------------


def _split_lines(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stream of term ids with NEWLINE between lines -> (the term ids, how many per line)."""
    newline = stream == NEWLINE
    line = np.cumsum(newline)
    tokens = stream[~newline]
    counts = np.bincount(line[~newline], minlength=int(newline.sum()) + 1)
    return tokens.astype(np.int32), counts.astype(np.uint32)


def _windows(tokens: np.ndarray, line_counts: np.ndarray, limits: IndexLimits) -> _Windows:
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
    return _Windows(
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


def _strip_blank_lines(lines: list[str]) -> str:
    rows = [line.rstrip("\r") for line in lines]
    while rows and not rows[0].strip():
        rows.pop(0)
    while rows and not rows[-1].strip():
        rows.pop()
    return "\n".join(rows)


# -- stored entries -------------------------------------------------------------------------


def _pack(arrays: list[np.ndarray], dtype: str) -> str:
    data = np.concatenate(arrays).astype(dtype) if arrays else np.zeros(0, dtype)
    return base64.b64encode(zlib.compress(data.tobytes(), 1)).decode("ascii")


def _unpack(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text, validate=True)), dtype)


def _entry(record: _FileRecord, tokens_at: int, lines_at: int) -> dict[str, Any]:
    return {
        "mtime_ns": record.mtime_ns,
        "size": record.size,
        "tokens": [tokens_at, len(record.tokens)],
        "lines": [lines_at, len(record.line_counts)],
        "definitions": [[d.name, d.kind, d.line, d.signature, d.doc] for d in record.definitions],
    }


def _stored_slice(array: np.ndarray, where: Any) -> np.ndarray:
    start, count = where
    if not (isinstance(start, int) and isinstance(count, int)):
        raise TypeError(where)
    if start < 0 or count < 0 or start + count > len(array):
        raise ValueError(where)
    return array[start : start + count]


def _unchanged(record: _FileRecord | None, mtime_ns: int, size: int) -> bool:
    return record is not None and (record.mtime_ns, record.size) == (mtime_ns, size)


def _entry_matches(entry: Any, mtime_ns: int, size: int) -> bool:
    return (
        isinstance(entry, dict) and entry.get("mtime_ns") == mtime_ns and entry.get("size") == size
    )


def _from_store(
    rel: str, entry: dict[str, Any], store: _Store, remap: np.ndarray, limits: IndexLimits
) -> _Parsed | None:
    """A stored file as if just read (term ids already the index's), or None if the entry is
    damaged."""
    try:
        tokens = _stored_slice(store.tokens, entry["tokens"])
        line_counts = _stored_slice(store.lines, entry["lines"])
        if int(line_counts.sum()) != len(tokens) or not len(line_counts):
            return None
        tokens = remap[tokens]
        definitions = tuple(
            Definition(str(name), sys.intern(str(kind)), rel, int(line), str(signature), str(doc))
            for name, kind, line, signature, doc in entry["definitions"]
        )
    except (KeyError, TypeError, ValueError):
        return None
    return _Parsed(
        rel,
        entry["mtime_ns"],
        entry["size"],
        None,
        tokens,
        line_counts.astype(np.uint32),
        _windows(tokens, line_counts, limits),
        definitions,
    )
