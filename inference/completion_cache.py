"""Completion cache: an in-memory LRU in front of diskcache under $FASTCOMPLETE_HOME/cache.

Key = model id + precision + prompt ids + the generation settings that change output. A corrupt
or unwritable cache directory is reported once (`problem`) and bypassed: the cache is an
optimisation, never a reason to fail a request.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from inference.tuning import COMPLETION_CACHE_BYTES, COMPLETION_CACHE_ITEMS

log = logging.getLogger(__name__)


def cache_key(model_id: str, precision: str, prompt_ids: list[int], settings: tuple) -> str:
    digest = hashlib.sha256()
    digest.update(f"{model_id}\0{precision}\0{settings!r}\0".encode())
    digest.update(np.asarray(prompt_ids, dtype=np.int64).tobytes())
    return digest.hexdigest()


class CompletionCache:
    def __init__(
        self,
        directory: Path | None,
        size_limit_bytes: int = COMPLETION_CACHE_BYTES,
        memory_items: int = COMPLETION_CACHE_ITEMS,
    ) -> None:
        self._memory: OrderedDict[str, Any] = OrderedDict()
        self._memory_items = memory_items
        self._lock = threading.Lock()
        self.problem: str | None = None  # set once when the disk layer was given up
        self._disk = None
        if directory is not None:
            self._open_disk(directory, size_limit_bytes)

    def _open_disk(self, directory: Path, size_limit_bytes: int) -> None:
        import diskcache

        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            # diskcache's SQLite defaults (64 MB mmap, 32 MB page cache) would let the server's
            # resident memory creep up by ~2 KB per cached completion for hours: keep them small.
            self._disk = diskcache.Cache(
                str(directory),
                size_limit=size_limit_bytes,
                sqlite_mmap_size=4 << 20,
                sqlite_cache_size=1024,
            )
        except Exception as exc:  # sqlite3.DatabaseError, PermissionError, ...: all mean "bypass"
            self._give_up(
                f"completion cache at {directory} is unusable ({exc}); running without it"
            )

    def _give_up(self, message: str) -> None:
        if self.problem is None:
            self.problem = message
            log.warning(message)
        self._disk = None

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
        if self._disk is None:
            return None
        try:
            value = self._disk.get(key)
        except Exception as exc:
            self._give_up(f"completion cache read failed ({exc}); running without it")
            return None
        if value is not None:
            self._remember(key, value)
        return value

    def put(self, key: str, value: Any) -> None:
        self._remember(key, value)
        if self._disk is None:
            return
        try:
            self._disk.set(key, value)
        except Exception as exc:
            self._give_up(f"completion cache write failed ({exc}); running without it")

    def _remember(self, key: str, value: Any) -> None:
        if self._memory_items <= 0:
            return
        with self._lock:
            self._memory[key] = value
            self._memory.move_to_end(key)
            while len(self._memory) > self._memory_items:
                self._memory.popitem(last=False)

    def close(self) -> None:
        if self._disk is not None:
            self._disk.close()
