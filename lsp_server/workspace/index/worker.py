"""Keeping the workspace index: built in the background from the workspace root, kept current
on save and on watched-file changes, and stored under $FASTCOMPLETE_HOME so that a restart reads
only what changed. Never on a request's path: requests use whatever is indexed so far."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from lsp_server.config.tuning import INDEX_PROGRESS_EVERY_S
from lsp_server.text.uris import file_path
from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index.files import IndexLimits
from lsp_server.workspace.index.workspace import IndexReport, WorkspaceIndex

log = logging.getLogger(__name__)

Progress = Callable[[str, int | None], None]  # (message, percentage; None: done)
IGNORE_FILES = (".gitignore", ".fastcompleteignore")


class Indexer:
    """The index of the first workspace folder (multi-root workspaces: the others lend snippets
    only through open documents)."""

    def __init__(self, store_dir: Path, limits: IndexLimits | None = None) -> None:
        self.store_dir = store_dir
        self.limits = limits or IndexLimits()
        self.exclusions = Exclusions(None)
        self.index: WorkspaceIndex | None = None
        self.state = "off"  # off | building | ready | failed
        self.report: IndexReport | None = None
        self._cancel = threading.Event()
        # One daemon thread (exit never waits for a build): builds and updates never race.
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _submit(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="index", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def start(self, root: Path, progress: Progress | None = None) -> None:
        """Index `root` in the background; `progress` is called from the index thread."""
        self.stop()
        self._cancel = threading.Event()
        self.exclusions = Exclusions(root)
        self.index = WorkspaceIndex(root, self.store_dir, self.limits, self.exclusions)
        self.state = "building"
        index, cancel = self.index, self._cancel
        self._submit(lambda: self._build(index, cancel, progress))

    def _build(
        self, index: WorkspaceIndex, cancel: threading.Event, progress: Progress | None
    ) -> None:
        last = 0.0

        def step(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if progress is not None and total and now - last >= INDEX_PROGRESS_EVERY_S:
                last = now
                progress(f"indexed {done}/{total} files", min(99, 100 * done // total))

        try:
            self.report = index.build(step, cancel)
        except Exception:  # the index is an aid: completions go on without it
            log.exception("indexing %s failed", index.root)
            self.state = "failed"
            if progress is not None:
                progress("indexing failed (see the log)", None)
            return
        if cancel.is_set():
            return
        self.state = "ready"
        r = self.report
        log.info(
            "indexed %s: %d files (%d read, %d reused) in %.1f s%s",
            index.root,
            r.files,
            r.read,
            r.reused,
            r.seconds,
            " (file limit reached)" if r.truncated else "",
        )
        if progress is not None:
            progress(f"indexed {r.files} files", None)

    def saved(self, uri: str) -> None:
        path = file_path(uri)
        if path is not None and self.index is not None:
            self._submit(lambda: self._update([path]))

    def changed(self, uris: Iterable[str]) -> None:
        """Watched files were created, changed or deleted."""
        paths = [p for u in uris if (p := file_path(u)) is not None]
        if not paths or self.index is None:
            return
        if any(p.name in IGNORE_FILES for p in paths):
            # What is excluded changed: start over (stored entries of unchanged files are reused).
            self.start(self.index.root)
            return
        self._submit(lambda: self._update(paths))

    def _update(self, paths: list[Path]) -> None:
        index = self.index
        if index is None:
            return
        for path in paths:
            try:
                index.update(path)
            except Exception:
                log.exception("updating the index for %s failed", path)

    def stop(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        self.stop()
        self._jobs.put(None)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state}
        if self.index is not None:
            out["files"] = self.index.file_count
        if self.report is not None:
            out["build_s"] = round(self.report.seconds, 2)
            out["reused"] = self.report.reused
            out["truncated"] = self.report.truncated
        return out
