"""What the index holds per file: its identifiers, line counts and definitions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsp_server.definitions import Definition
from lsp_server.index.postings import Windows


@dataclass(frozen=True, eq=False)
class FileRecord:
    rel: str
    mtime_ns: int
    size: int
    tokens: np.ndarray  # int32 term ids of the identifiers, in order
    line_counts: np.ndarray  # uint32: how many of them each line holds
    definitions: tuple[Definition, ...]


@dataclass(frozen=True, eq=False)
class Parsed:
    """A file read and tokenized (term ids local to it: `words`), before it joins the index."""

    rel: str
    mtime_ns: int
    size: int
    words: list[str] | None  # None: the term ids are the index's already
    tokens: np.ndarray
    line_counts: np.ndarray
    windows: Windows
    definitions: tuple[Definition, ...]


def unchanged(record: FileRecord | None, mtime_ns: int, size: int) -> bool:
    return record is not None and (record.mtime_ns, record.size) == (mtime_ns, size)
