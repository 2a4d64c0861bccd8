"""An index of the workspace's source files for the prompt: BM25 over ~20-line windows (code that
resembles the code being written) and the definitions of named functions and types.

Built on a background thread, searched from request threads while it grows. The windows live in
an embedded search engine (lsp_server.workspace.index.store, tantivy) on disk, written as files are read,
so a restart re-reads only the files that changed. Windows' text is not kept: the few picked
ones are read from disk when a search returns them.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from lsp_server.config.tuning import AMBIGUOUS_DEFINITIONS, INDEX_MIN_MATCHED_TERMS
from lsp_server.text.languages import IDENT, INDEXED_EXTENSIONS
from lsp_server.workspace.definitions import Definition, extract_definitions
from lsp_server.workspace.exclusions import Exclusions, relative_path
from lsp_server.workspace.index.files import (
    DEFAULT_LIMITS,
    IndexLimits,
    file_lines,
    indexable,
    read_text,
    strip_blank_lines,
    walk,
)
from lsp_server.workspace.index.store import FORMAT_VERSION, FileMeta, WindowStore
from lsp_server.workspace.snippet import Snippet


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
        folder = f"{digest}.v{FORMAT_VERSION}"
        self.store_path = store_dir / folder if store_dir is not None else None
        if store_dir is not None:  # the JSON store of versions before tantivy: never read again
            (store_dir / f"{digest}.json").unlink(missing_ok=True)
        self._store = WindowStore(self.store_path, limits)
        self._lock = threading.Lock()
        self._files: dict[str, FileMeta] = {}
        self._by_name: dict[str, list[Definition]] = {}
        self._version = 0
        self._sorted_names: tuple[int, list[str]] = (-1, [])  # (version, sorted _by_name)

    # -- what callers ask -------------------------------------------------------------------

    @property
    def file_count(self) -> int:
        with self._lock:
            return len(self._files)

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
        candidates = self._store.candidates(counts, skip)
        picked: list[Snippet] = []
        taken: list[tuple[str, int]] = []
        lines_of: dict[str, list[str] | None] = {}
        used = 0
        window = self.limits.window_lines
        for rel, start in candidates:
            if any(r == rel and abs(s - start) < window for r, s in taken):
                continue
            if rel not in lines_of:
                lines_of[rel] = file_lines(self.root, rel, self.exclusions)
            lines = lines_of[rel]
            if lines is None:
                continue
            text = strip_blank_lines(lines[start : start + window])
            # Two distinct query terms at least: one shared name is chance.
            if len(counts.keys() & set(IDENT.findall(text))) < INDEX_MIN_MATCHED_TERMS:
                continue
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

    def paths(self) -> list[str]:
        """The indexed files, relative to the root."""
        with self._lock:
            return sorted(self._files)

    def defined_names(self, prefix: str, *, skip: Collection[str] = (), limit: int) -> list[str]:
        """Names defined outside `skip` that start with `prefix`, in order: at most `limit`."""
        out: list[str] = []
        with self._lock:
            if self._sorted_names[0] != self._version:
                self._sorted_names = (self._version, sorted(self._by_name))
            names = self._sorted_names[1]
            for name in names[bisect_left(names, prefix) :]:
                if not name.startswith(prefix) or len(out) >= limit:
                    break
                if any(d.path not in skip for d in self._by_name[name]):
                    out.append(name)
        return out

    # -- building and keeping it current ----------------------------------------------------

    def build(
        self,
        progress: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> IndexReport:
        """Index the tree: files unchanged since the last build (or in the stored index) are
        not read again; files gone since are dropped. `cancel` stops it between files (what is
        indexed so far stays searchable, and stored)."""
        began = time.perf_counter()
        files, skipped, truncated = walk(self.root, self.limits, self.exclusions)
        stored: dict[str, FileMeta] | None = None
        reused = read = 0
        seen: set[str] = set()
        for done, (rel, path, mtime_ns, size) in enumerate(files, 1):
            if cancel is not None and cancel.is_set():
                break
            seen.add(rel)
            with self._lock:
                current = self._files.get(rel)
            if _unchanged(current, mtime_ns, size):
                reused += 1
            else:
                if stored is None:
                    stored = self._store.stored_files()
                kept = stored.get(rel)
                if _unchanged(kept, mtime_ns, size):
                    assert kept is not None
                    self._adopt(kept)  # its windows are in the store already
                    reused += 1
                elif self._index_file(rel, path, mtime_ns, size):
                    read += 1
                else:
                    skipped += 1
                    self._remove(rel)
            if progress is not None:
                progress(done, len(files))
        if cancel is None or not cancel.is_set():
            with self._lock:
                gone = [rel for rel in self._files if rel not in seen]
            for rel in [*gone, *(r for r in stored or () if r not in seen)]:
                self._remove(rel)
        self._store.commit()
        return IndexReport(
            files=self.file_count,
            reused=reused,
            read=read,
            skipped=skipped,
            seconds=time.perf_counter() - began,
            truncated=truncated,
        )

    def update(self, path: Path) -> None:
        """(Re)index one file after it changed, or drop it if it is gone, excluded, ignored, too
        big or binary; stored at once."""
        self._update(path)
        self._store.commit()

    def _update(self, path: Path) -> None:
        rel = self.relative(path)
        if rel is None:
            return
        full = self.root / rel
        try:
            stat = full.stat()
        except OSError:
            self._remove_below(rel)  # (a deleted folder: the files in it)
            return
        if not indexable(full, rel, stat, self.limits, self.exclusions):
            self._remove(rel)
            return
        with self._lock:
            current = self._files.get(rel)
            if current is None and len(self._files) >= self.limits.max_files:
                return
        if _unchanged(current, stat.st_mtime_ns, stat.st_size):
            return
        if not self._index_file(rel, full, stat.st_mtime_ns, stat.st_size):
            self._remove(rel)

    def remove(self, path: Path) -> None:
        """Drop a file, or every file in a folder."""
        rel = self.relative(path)
        if rel is not None:
            self._remove_below(rel)
            self._store.commit()

    # -- files in and out -------------------------------------------------------------------

    def _index_file(self, rel: str, path: Path, mtime_ns: int, size: int) -> bool:
        """Read a file into the store; False when it cannot be (unreadable, too big, binary)."""
        text = read_text(path, self.limits)
        if text is None:
            return False
        language = INDEXED_EXTENSIONS.get(os.path.splitext(rel)[1].lower())
        definitions = extract_definitions(language, text, rel) if language else ()
        meta = FileMeta(rel, mtime_ns, size, definitions)
        self._store.put(meta, text)
        self._adopt(meta)
        return True

    def _adopt(self, meta: FileMeta) -> None:
        """`meta`'s file joins (or replaces itself in) what is searched for definitions."""
        with self._lock:
            self._forget(meta.rel)
            self._files[meta.rel] = meta
            for definition in meta.definitions:
                self._by_name.setdefault(definition.name, []).append(definition)
            self._version += 1

    def _remove_below(self, rel: str) -> None:
        with self._lock:
            below = [r for r in self._files if r.startswith(rel + "/")]
        for r in [rel, *below]:
            self._remove(r)

    def _remove(self, rel: str) -> None:
        self._store.delete(rel)
        with self._lock:
            if self._forget(rel):
                self._version += 1

    def _forget(self, rel: str) -> bool:
        """Take a file's definitions out of what is searched (lock held)."""
        meta = self._files.pop(rel, None)
        if meta is None:
            return False
        for definition in meta.definitions:
            same = self._by_name.get(definition.name, [])
            if definition in same:
                same.remove(definition)
            if not same:
                self._by_name.pop(definition.name, None)
        return True


def _unchanged(meta: FileMeta | None, mtime_ns: int, size: int) -> bool:
    return meta is not None and (meta.mtime_ns, meta.size) == (mtime_ns, size)
