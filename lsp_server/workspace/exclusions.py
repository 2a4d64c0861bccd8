"""What the server must never read for a prompt, and what the workspace index leaves out.

Excluded (`excluded`): secrets (keys, credential stores, .env files) and whatever the user lists
in `<root>/.fastcompleteignore`. Such a file is never indexed, quoted in a prompt, or completed
in, wherever it lies. Ignored (`ignored`): what git ignores; the index skips it (build output,
vendored code), but an open document that git ignores is still completed.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
from collections.abc import Iterable
from pathlib import Path, PurePath

from pathspec import GitIgnoreSpec

from lsp_server.text.uris import local_path

log = logging.getLogger(__name__)

IGNORE_FILE = ".fastcompleteignore"
# gitignore syntax. Dotfiles and key formats that hold credentials; names that say "secret" or
# "credentials" in any extension, source files included: a `secrets.py` is often where a
# project keeps its keys (a user re-includes one with `!secrets.py` in .fastcompleteignore).
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    ".dockercfg",
    ".docker/config.json",
    ".kube/config",
    "credentials",
    "credentials.*",
    "*credentials*.json",
    "client_secret*.json",
    "service-account*.json",
    "secrets.*",
    "*.tfvars",
    "*.tfstate",
    "*.tfstate.backup",
    ".aws/",
    ".ssh/",
    ".gnupg/",
)
# Never walked by the index: tools' caches, dependencies, build output.
SKIPPED_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "site-packages",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        "dist",
        "build",
    }
)
# Outside the root only the last parts of a path are matched: a project that happens to lie in a
# folder named like a pattern ("build", "credentials") stays usable.
TRAILING_PARTS = 3


def relative_path(path_or_uri: str | PurePath, roots: Iterable[str]) -> str | None:
    """The path with "/" of a local file relative to the first of `roots` (absolute, with "/")
    it lies under, the root itself excluded; else None."""
    path, local = local_path(path_or_uri)
    if not local or not path.startswith("/"):
        return None
    path = posixpath.normpath(path)
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix) and len(path) > len(prefix):
            return path[len(prefix) :]
    return None


class Exclusions:
    """Matching is thread-safe: the index thread and request threads share one instance."""

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root is not None else None
        # A root reached through a symlink is matched under both names.
        self._roots = tuple(
            dict.fromkeys(Path(os.path.abspath(r)).as_posix() for r in (root, self.root) if r)
        )
        self._defaults = GitIgnoreSpec.from_lines(DEFAULT_EXCLUDES)
        self._lock = threading.Lock()
        self._excludes = self._defaults
        self._git_specs: dict[str, GitIgnoreSpec | None] = {}
        self._dir_ignored: dict[str, bool] = {}
        self.problems: list[str] = []  # ignore-file lines that are not valid patterns (skipped)
        self.reload()

    def reload(self) -> None:
        """Read the ignore files again (one of them changed)."""
        lines: list[str] = []
        self.problems = []
        if self.root is not None:
            lines = self._valid(_read_lines(self.root / IGNORE_FILE), IGNORE_FILE)
        # One spec: a later `!pattern` of the user's re-includes what a default excludes.
        excludes = GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *lines])
        with self._lock:
            self._excludes = excludes
            self._git_specs = {}
            self._dir_ignored = {}

    def relative(self, path_or_uri: str | PurePath) -> str | None:
        """The path relative to the root with "/", for a local file under it; else None."""
        return relative_path(path_or_uri, self._roots)

    def excluded(self, path_or_uri: str | PurePath, *, is_dir: bool | None = None) -> bool:
        """`is_dir`: whether the path is a folder (None: ask the file system)."""
        rel = self.relative(path_or_uri)
        if rel is not None:
            with self._lock:
                spec = self._excludes
            if is_dir is None:
                is_dir = self._is_dir(rel)
            return spec.match_file(rel + "/" if is_dir else rel)
        path, _ = local_path(path_or_uri)
        trailing = "/".join(p for p in path.split("/")[-TRAILING_PARTS:] if p)
        return bool(trailing) and self._defaults.match_file(trailing)

    def ignored(self, path: str | PurePath, *, is_dir: bool | None = None) -> bool:
        """Whether git ignores `path` (a file or folder under the root): the root's .gitignore,
        those of the folders above it, and .git/info/exclude. A file in an ignored folder is
        ignored, whatever a deeper `!pattern` says (as git does)."""
        rel = self.relative(path)
        if rel is None:
            return False
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if self._folder_ignored("/".join(parts[:depth])):
                return True
        return self._matches_gitignore(parts, self._is_dir(rel) if is_dir is None else is_dir)

    def _is_dir(self, rel: str) -> bool:
        return self.root is not None and os.path.isdir(os.path.join(self.root, rel))

    def _folder_ignored(self, rel: str) -> bool:
        with self._lock:
            known = self._dir_ignored.get(rel)
        if known is None:
            known = self._matches_gitignore(rel.split("/"), True)
            with self._lock:
                self._dir_ignored[rel] = known
        return known

    def _matches_gitignore(self, parts: list[str], is_dir: bool) -> bool:
        """The deepest .gitignore with a pattern for the path decides (git's precedence)."""
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._git_spec("/".join(parts[:depth]))
            if spec is None:
                continue
            below = "/".join(parts[depth:])
            result = spec.check_file(below + "/" if is_dir else below)
            if result.include is not None:
                return result.include
        return False

    def _git_spec(self, folder: str) -> GitIgnoreSpec | None:
        with self._lock:
            if folder in self._git_specs:
                return self._git_specs[folder]
        if self.root is None:
            return None
        base = self.root / folder
        lines = _read_lines(base / ".gitignore")
        if not folder:
            # .gitignore after info/exclude: the later pattern wins within one spec.
            lines = _read_lines(base / ".git" / "info" / "exclude") + lines
        lines = self._valid(lines, f"{folder}/.gitignore".lstrip("/"))
        spec = GitIgnoreSpec.from_lines(lines) if lines else None
        with self._lock:
            self._git_specs[folder] = spec
        return spec

    def _valid(self, lines: list[str], source: str) -> list[str]:
        """The lines that are patterns; a bad one (`!` alone, `[z-a]`) is skipped and reported
        rather than losing the whole file."""
        try:
            GitIgnoreSpec.from_lines(lines)
            return lines
        except Exception:  # pathspec raises its own error types and re.error
            pass
        kept = []
        for number, line in enumerate(lines, 1):
            try:
                GitIgnoreSpec.from_lines([line])
            except Exception:
                problem = f"{source}:{number}: not a valid pattern ({line!r}), skipped"
                log.warning("%s", problem)
                self.problems.append(problem)
                continue
            kept.append(line)
        return kept


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
