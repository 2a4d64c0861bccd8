"""The stored index: every file's term ids and line counts (and definitions) in one JSON file
under `store_dir`, written atomically, so that a restart re-reads only the files that changed."""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsp_server.definitions import Definition
from lsp_server.index.files import IndexLimits
from lsp_server.index.postings import windows_of
from lsp_server.index.records import FileRecord, Parsed

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class Store:
    """The stored index: every file's term ids (of `vocab`) and line counts in two arrays, each
    file's entry saying where its own lie."""

    vocab: list[str]
    files: dict[str, Any]
    tokens: np.ndarray  # int32
    lines: np.ndarray  # uint32


def load_store(store_path: Path | None, root: Path) -> Store | None:
    """The stored index, or None when there is none or it is unreadable, of another format or
    another root (then it is rebuilt)."""
    if store_path is None:
        return None
    try:
        data = json.loads(store_path.read_bytes())
        if (
            not isinstance(data, dict)
            or data.get("version") != FORMAT_VERSION
            or data.get("root") != str(root)
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
    return Store(data["vocab"], data["files"], tokens, lines)


def write_store(store_path: Path, root: Path, records: list[FileRecord], vocab: list[str]) -> bool:
    """Write the index (atomically: the folder may be shared); False when it could not be."""
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
        "root": str(root),
        "vocab": vocab,
        "tokens": _pack([r.tokens for r in records], "<i4"),
        "lines": _pack([r.line_counts for r in records], "<u4"),
        "files": files,
    }
    folder = store_path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=store_path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                # dumps, not dump: dump encodes in Python, several times slower.
                out.write(json.dumps(payload, separators=(",", ":")))
            os.replace(tmp, store_path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        log.warning("could not store the index of %s", root, exc_info=True)
        return False
    return True


# -- stored entries -------------------------------------------------------------------------


def _pack(arrays: list[np.ndarray], dtype: str) -> str:
    data = np.concatenate(arrays).astype(dtype) if arrays else np.zeros(0, dtype)
    return base64.b64encode(zlib.compress(data.tobytes(), 1)).decode("ascii")


def _unpack(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text, validate=True)), dtype)


def _entry(record: FileRecord, tokens_at: int, lines_at: int) -> dict[str, Any]:
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


def entry_matches(entry: Any, mtime_ns: int, size: int) -> bool:
    return (
        isinstance(entry, dict) and entry.get("mtime_ns") == mtime_ns and entry.get("size") == size
    )


def from_store(
    rel: str, entry: dict[str, Any], store: Store, remap: np.ndarray, limits: IndexLimits
) -> Parsed | None:
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
    return Parsed(
        rel,
        entry["mtime_ns"],
        entry["size"],
        None,
        tokens,
        line_counts.astype(np.uint32),
        windows_of(tokens, line_counts, limits),
        definitions,
    )
