"""Which files of the workspace are indexed, and what is read from each: its text when it is
indexed, its lines when a search picks one of its windows."""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from lsp_server.config.tuning import BINARY_PROBE_BYTES
from lsp_server.text.languages import SOURCE_EXTENSIONS
from lsp_server.workspace.exclusions import SKIPPED_DIRS, Exclusions

Found = tuple[str, Path, int, int]  # (relative path, path, mtime_ns, size)


@dataclass(frozen=True)
class IndexLimits:
    max_files: int = 5000
    max_file_bytes: int = 256_000
    window_lines: int = 20
    window_step: int = 10


DEFAULT_LIMITS = IndexLimits()


def walk(root: Path, limits: IndexLimits, exclusions: Exclusions) -> tuple[list[Found], int, bool]:
    """Source files to index, breadth first (files near the root first when the limit cuts);
    files skipped; whether cut."""
    found: list[Found] = []
    skipped = 0
    folders: deque[tuple[Path, str]] = deque([(root, "")])
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
                    or exclusions.excluded(path, is_dir=True)
                    or exclusions.ignored(path, is_dir=True)
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
                stat.st_size > limits.max_file_bytes
                or exclusions.excluded(path, is_dir=False)
                or exclusions.ignored(path, is_dir=False)
            ):
                skipped += 1
                continue
            if len(found) == limits.max_files:
                return found, skipped, True
            found.append((rel, path, stat.st_mtime_ns, stat.st_size))
    return found, skipped, False


def indexable(
    full: Path, rel: str, stat: os.stat_result, limits: IndexLimits, exclusions: Exclusions
) -> bool:
    """Whether a changed file belongs in the index (walk's rules, for one file)."""
    return not (
        not full.is_file()
        or any(part in SKIPPED_DIRS for part in rel.split("/")[:-1])
        or os.path.splitext(rel)[1].lower() not in SOURCE_EXTENSIONS
        or stat.st_size > limits.max_file_bytes
        or exclusions.excluded(full)
        or exclusions.ignored(full)
    )


def read_text(path: Path, limits: IndexLimits) -> str | None:
    """A source file's text; None: unreadable, too big or binary."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > limits.max_file_bytes or b"\0" in data[:BINARY_PROBE_BYTES]:
        return None
    return data.decode("utf-8", "replace")


def file_lines(root: Path, rel: str, exclusions: Exclusions) -> list[str] | None:
    """A file's lines, read for the windows a search picked (None: gone, or excluded since it
    was indexed)."""
    path = root / rel
    if exclusions.excluded(path):
        return None
    try:
        # Bytes, not read_text: its universal newlines would count a lone "\r" as a line.
        return path.read_bytes().decode("utf-8", "replace").split("\n")
    except OSError:
        return None


def strip_blank_lines(lines: list[str]) -> str:
    rows = [line.rstrip("\r") for line in lines]
    while rows and not rows[0].strip():
        rows.pop(0)
    while rows and not rows[-1].strip():
        rows.pop()
    return "\n".join(rows)
