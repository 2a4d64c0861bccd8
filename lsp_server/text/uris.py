"""What a document's URI (or a plain file name) stands for: the one place a URI becomes a path."""

from __future__ import annotations

import re
from pathlib import Path, PurePath
from urllib.parse import unquote, urlsplit

# A URI scheme: two or more characters, so that a Windows drive ("C:\\x") reads as a path.
URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
PROMPT_PATH_PARTS = 3  # the prompt names a file by its last parts: "pkg/module/file.py"


def local_path(path_or_uri: str | PurePath) -> tuple[str, bool]:
    """The path (with "/", percent-decoded) a document or file name stands for, and whether it
    is a local file (a file:// URI or a plain path) rather than some other scheme's (untitled:,
    vscode-remote:)."""
    if isinstance(path_or_uri, PurePath):
        return path_or_uri.as_posix(), True
    if URI_SCHEME.match(path_or_uri):
        parts = urlsplit(path_or_uri)
        if parts.scheme != "file":
            return unquote(parts.path), False
        # Open documents are keyed by their percent-decoded URI, so a "#" or "?" in a file URI
        # is part of a file's name ("C#/a.cs"): only the authority is not path.
        rest = path_or_uri.split(":", 1)[1]
        if rest.startswith("//"):
            slash = rest.find("/", 2)
            rest = rest[slash:] if slash >= 0 else ""
        return unquote(rest), True
    return Path(path_or_uri).as_posix(), True


def file_path(uri: str) -> Path | None:
    """The local file a file:// URI names, or None for any other scheme."""
    path, local = local_path(uri)
    return Path(path) if local and URI_SCHEME.match(uri) else None


def prompt_path(uri: str) -> str:
    """The last parts of a document's path: what the prompt names the file by."""
    path, _ = local_path(uri)
    return "/".join(path.rstrip("/").split("/")[-PROMPT_PATH_PARTS:])
