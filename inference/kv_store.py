"""The KV of prompts the background prefill finished, kept on disk: a file seen before is warm
at once when it is reopened or switched back to, in this server or the next one.

An entry holds one prompt's tokens and their KV, keyed by the model (the hashes of its files)
and those exact tokens. Beside it, a pointer at every `KV_STORE_BLOCK_TOKENS` tokens says "the
first b tokens of this prompt are in that entry", so a prompt that shares only a head with it
(the repository context and the file above the cursor's region) finds that head too. diskcache
bounds the folder by size, least recently used out first, and is safe for several servers on
one folder. Each entry ends in a sha256 of its bytes, checked before use: a corrupt or truncated
entry is deleted and counts as a miss. Writing never blocks a request: entries are written on a
thread of their own, and one that cannot be written (a full disk) is dropped with a log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

import diskcache
import numpy as np

from inference.manifest import Manifest
from inference.paths import ensure_private_dir
from inference.tuning import KV_STORE_BLOCK_TOKENS, KV_STORE_PENDING_ITEMS

log = logging.getLogger(__name__)

MAGIC = b"fastcomplete-kv-1\n"
DIGEST_BYTES = 32


class CorruptEntry(Exception):
    """An entry whose bytes do not match its own checksum or header."""


@dataclass(frozen=True)
class Head:
    """A stored entry that holds the first `tokens` tokens of a prompt."""

    entry: str
    tokens: int


def model_key(name: str, variant: str, precision: str, file_hashes: dict[str, str]) -> str:
    """Who computed a KV: the same tokens through other weights give other numbers."""
    blob = json.dumps([name, variant, precision, sorted(file_hashes.items())]).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def open_store(manifest: Manifest, directory: Path | None, size_bytes: int) -> KVStore | None:
    """The KV store for a loaded model (None: off, or the folder is unusable, which costs the
    store and never the model)."""
    if directory is None or size_bytes <= 0:
        return None
    hashes = {name: entry.sha256 for name, entry in manifest.files.items()}
    key = model_key(manifest.name, manifest.variant, manifest.precision, hashes)
    try:
        return KVStore(directory, size_bytes, key)
    except Exception as exc:
        log.warning("KV store %s unusable: %s", directory, exc)
        return None


def _encode(key: str, tokens: np.ndarray, kv: np.ndarray) -> bytes:
    header = json.dumps(
        {"model": key, "shape": list(kv.shape), "dtype": str(kv.dtype), "tokens": len(tokens)}
    ).encode()
    body = b"".join(
        (MAGIC, len(header).to_bytes(4, "little"), header, tokens.tobytes(), kv.tobytes())
    )
    return body + hashlib.sha256(body).digest()


def _decode(key: str, blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, kv) of an entry; CorruptEntry unless every byte is as written."""
    if len(blob) < len(MAGIC) + 4 + DIGEST_BYTES or not blob.startswith(MAGIC):
        raise CorruptEntry("not an entry")
    body, digest = blob[:-DIGEST_BYTES], blob[-DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    at = len(MAGIC)
    size = int.from_bytes(body[at : at + 4], "little")
    header = json.loads(body[at + 4 : at + 4 + size])
    if header["model"] != key:
        raise CorruptEntry("another model's entry")
    at += 4 + size
    n = header["tokens"]
    tokens = np.frombuffer(body, dtype=np.int32, count=n, offset=at)
    kv = np.frombuffer(body, dtype=header["dtype"], offset=at + 4 * n).reshape(header["shape"])
    return tokens, kv


class KVStore:
    """Stored prompt KV for one model; `kv` arrays are [2 * layers, kv_heads, tokens, head_dim]."""

    def __init__(self, directory: Path, size_bytes: int, key: str) -> None:
        self.key = key
        self.directory = directory
        self._cache = diskcache.Cache(
            str(ensure_private_dir(directory)),  # the KV is the user's code, in other form
            size_limit=size_bytes,
            eviction_policy="least-recently-used",
            cull_limit=16,
        )
        self._pending: queue.Queue[tuple[np.ndarray, np.ndarray] | None] = queue.Queue(
            KV_STORE_PENDING_ITEMS
        )
        self._writer: threading.Thread | None = None
        self.problem: str | None = None  # the last write that failed, for stats
        self.counts = {"saved": 0, "hits": 0, "hit_tokens": 0, "corrupt": 0, "dropped": 0}

    # -- reading --------------------------------------------------------------------------------

    def _pointers(self, tokens: list[int] | np.ndarray) -> list[tuple[int, str]]:
        """(b, pointer key) for every block boundary b of `tokens`, shortest first."""
        ids = np.asarray(tokens, dtype=np.int32)
        digest = hashlib.sha256(self.key.encode())
        out = []
        for b in range(KV_STORE_BLOCK_TOKENS, len(ids) + 1, KV_STORE_BLOCK_TOKENS):
            digest.update(ids[b - KV_STORE_BLOCK_TOKENS : b].tobytes())
            out.append((b, "p" + digest.copy().hexdigest()[:40]))
        return out

    def longest(self, tokens: list[int]) -> Head | None:
        """The stored entry that holds the longest head of `tokens` (not yet verified)."""
        try:
            for b, pointer in reversed(self._pointers(tokens)):
                entry = self._cache.get(pointer, retry=True)
                if isinstance(entry, str):
                    return Head(entry, b)
        except Exception as exc:  # an unreadable folder is a miss, never a failed request
            log.warning("KV store %s unreadable: %s", self.directory, exc)
        return None

    def load(self, tokens: list[int], more_than: int = 0) -> np.ndarray | None:
        """The KV of the longest stored head of `tokens` longer than `more_than` tokens, checked
        byte for byte ([2 * layers, kv_heads, b, head_dim]); None when there is none."""
        head = self.longest(tokens)
        if head is None or head.tokens <= more_than:
            return None
        try:
            blob = self._cache.get(head.entry, retry=True)
            if blob is None:
                return None  # evicted since its pointer was written
            stored, kv = _decode(self.key, blob)
        except CorruptEntry as exc:
            log.warning("KV store entry %s dropped: %s", head.entry, exc)
            self.counts["corrupt"] += 1
            self._cache.delete(head.entry, retry=True)
            return None
        except Exception as exc:
            log.warning("KV store %s unreadable: %s", self.directory, exc)
            return None
        b = head.tokens
        if len(stored) < b or not np.array_equal(stored[:b], np.asarray(tokens[:b])):
            return None  # a hash collision, or a pointer rewritten by another prompt
        self.counts["hits"] += 1
        self.counts["hit_tokens"] += b
        return kv[:, :, :b, :]

    # -- writing --------------------------------------------------------------------------------

    def holds(self, tokens: list[int]) -> bool:
        """Whether a stored entry already holds every whole block of `tokens`."""
        head = self.longest(tokens)
        return head is not None and head.tokens == len(tokens) // KV_STORE_BLOCK_TOKENS * (
            KV_STORE_BLOCK_TOKENS
        )

    def save_later(self, tokens: list[int], kv: np.ndarray) -> None:
        """Store `kv` (a copy the caller no longer touches) on the writer thread; dropped when
        writes are already waiting (the newest prompts matter, and memory stays bounded)."""
        try:
            self._pending.put_nowait((np.asarray(tokens, dtype=np.int32), kv))
        except queue.Full:
            self.counts["dropped"] += 1
            return
        if self._writer is None or not self._writer.is_alive():
            self._writer = threading.Thread(target=self._write_loop, name="kv-store", daemon=True)
            self._writer.start()

    def save(self, tokens: np.ndarray, kv: np.ndarray) -> bool:
        """Write one entry and its pointers now; False (logged) when it cannot be written."""
        entry = "e" + hashlib.sha256(self.key.encode() + tokens.tobytes()).hexdigest()[:40]
        try:
            self._cache.set(entry, _encode(self.key, tokens, kv), retry=True)
            for _, pointer in self._pointers(tokens):
                self._cache.set(pointer, entry, retry=True)
        except Exception as exc:  # a full disk, a read-only folder: serving goes on without it
            if self.problem is None:
                log.warning("KV store %s: cannot write (%s); going on without it", entry, exc)
            self.problem = f"{type(exc).__name__}: {exc}"
            self.counts["dropped"] += 1
            return False
        self.counts["saved"] += 1
        return True

    def _write_loop(self) -> None:
        while True:
            try:
                item = self._pending.get(timeout=5.0)
            except queue.Empty:
                return  # idle: the next save starts a new writer
            if item is None:
                return
            self.save(*item)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Until every pending write is done (tests, shutdown)."""
        writer = self._writer
        if writer is not None and writer.is_alive():
            self._pending.put(None, timeout=timeout_s)
            writer.join(timeout_s)

    def stats(self) -> dict[str, object]:
        try:
            volume = self._cache.volume()
        except Exception:
            volume = None
        return {**self.counts, "bytes": volume, "problem": self.problem}

    def close(self) -> None:
        self.flush()
        self._cache.close()
