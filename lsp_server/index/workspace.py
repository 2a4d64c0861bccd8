"""An index of the workspace's source files for the prompt: BM25 over ~20-line windows (code that
resembles the code being written) and the definitions of named functions and types.

Built on a background thread, searched from request threads while it grows. Each file keeps its
identifier stream (term ids with per-line counts): enough to rebuild its windows, so the stored
index (lsp_server.index.store) lets a restart re-read only the files that changed. Windows' text
is not kept: the few picked ones are read from disk when a search returns them.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from inference.tuning import AMBIGUOUS_DEFINITIONS, INDEX_MIN_MATCHED_TERMS
from lsp_server.definitions import Definition, extract_definitions
from lsp_server.exclusions import Exclusions, relative_path
from lsp_server.index.files import (
    DEFAULT_LIMITS,
    IndexLimits,
    file_lines,
    indexable,
    strip_blank_lines,
    tokenize,
    walk,
)
from lsp_server.index.postings import Postings, Windows, windows_of
from lsp_server.index.records import FileRecord, Parsed, unchanged
from lsp_server.index.store import Store, entry_matches, from_store, load_store, write_store
from lsp_server.languages import IDENT, INDEXED_EXTENSIONS
from lsp_server.snippet import Snippet


@dataclass(frozen=True)
class IndexReport:
    files: int  # in the index after the build
    reused: int  # unchanged since the last build or the stored index: not read
    read: int
    skipped: int  # source files left out: excluded, gitignored, too big, binary, unreadable
    seconds: float
    truncated: bool  # max_files reached: the rest of the tree is not indexed


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
        self._postings = Postings(limits)
        self._records: list[FileRecord | None] = []
        self._slot_of: dict[str, int] = {}
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
        if len(counts) < INDEX_MIN_MATCHED_TERMS:
            return []
        with self._lock:
            skipped = [s for rel in skip if (s := self._slot_of.get(rel)) is not None]
            found = self._postings.candidates(counts, skipped)
            candidates = [(r.rel, start) for slot, start in found if (r := self._records[slot])]
        picked: list[Snippet] = []
        taken: list[tuple[str, int]] = []
        lines_of: dict[str, list[str] | None] = {}
        used = 0
        for rel, start in candidates:
            window = self.limits.window_lines
            if any(r == rel and abs(s - start) < window for r, s in taken):
                continue
            if rel not in lines_of:
                lines_of[rel] = file_lines(self.root, rel, self.exclusions)
            lines = lines_of[rel]
            if lines is None:
                continue
            text = strip_blank_lines(lines[start : start + window])
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
                if not found or len(found) > AMBIGUOUS_DEFINITIONS:
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
        files, skipped, truncated = walk(self.root, self.limits, self.exclusions)
        store: Store | None = None
        store_loaded = False
        remap = None
        reused = read = 0
        seen: set[str] = set()
        for done, (rel, path, mtime_ns, size) in enumerate(files, 1):
            if cancel is not None and cancel.is_set():
                break
            seen.add(rel)
            with self._lock:
                slot = self._slot_of.get(rel)
                current = self._records[slot] if slot is not None else None
            if unchanged(current, mtime_ns, size):
                reused += 1
            else:
                if not store_loaded:
                    store, store_loaded = load_store(self.store_path, self.root), True
                parsed = None
                entry = store.files.get(rel) if store is not None else None
                if store is not None and entry_matches(entry, mtime_ns, size):
                    if remap is None:
                        with self._lock:
                            remap = self._postings.remap(store.vocab)
                    parsed = from_store(rel, entry, store, remap, self.limits)
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
            self._postings.settle()
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
        if not indexable(full, rel, stat, self.limits, self.exclusions):
            self._remove(rel)
            return
        with self._lock:
            slot = self._slot_of.get(rel)
            current = self._records[slot] if slot is not None else None
            if current is None and len(self._slot_of) >= self.limits.max_files:
                return
        if unchanged(current, stat.st_mtime_ns, stat.st_size):
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
        """Write the index under `store_dir`."""
        if self.store_path is None:
            return
        with self._lock:
            records = [r for r in self._records if r is not None]
            vocab = list(self._postings.vocab)  # insertion order is id order
        if write_store(self.store_path, self.root, records, vocab):
            self._dirty = False

    # -- files in and out -------------------------------------------------------------------

    def _read(self, rel: str, path: Path, mtime_ns: int, size: int) -> Parsed | None:
        found = tokenize(path, self.limits)
        if found is None:
            return None
        language = INDEXED_EXTENSIONS.get(os.path.splitext(rel)[1].lower())
        return Parsed(
            rel,
            mtime_ns,
            size,
            found.words,
            found.tokens,
            found.line_counts,
            windows_of(found.tokens, found.line_counts, self.limits),
            extract_definitions(language, found.text, rel) if language else (),
        )

    def _add(self, parsed: Parsed) -> None:
        """Make a file searchable: its terms join the vocabulary, its windows the postings."""
        windows, tokens = parsed.windows, parsed.tokens
        if parsed.words is not None:
            with self._lock:
                to_global = self._postings.remap(parsed.words)
            windows = Windows(windows.window, to_global[windows.term], windows.tf, windows.lengths)
            tokens = to_global[tokens]
        record = FileRecord(
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
            for definition in record.definitions:
                self._by_name.setdefault(definition.name, []).append(definition)
            self._version += 1
            self._postings.add(slot, windows)

    def _remove(self, rel: str) -> None:
        with self._lock:
            slot = self._slot_of.pop(rel, None)
            if slot is None:
                return
            self._drop(rel, slot)
            self._records[slot] = None
            self._dirty = True
            self._postings.compact()

    def _drop(self, rel: str, slot: int | None = None) -> None:
        """Take a file's windows and definitions out of what searches see (lock held)."""
        slot = self._slot_of.get(rel) if slot is None else slot
        if slot is None or not self._postings.drop(slot):
            return
        record = self._records[slot]
        if record is not None:
            for definition in record.definitions:
                same = self._by_name.get(definition.name, [])
                if definition in same:
                    same.remove(definition)
                if not same:
                    self._by_name.pop(definition.name, None)
        self._version += 1
