"""Three repositories no model here was trained on, pinned by commit, for bench/unseen.py.

    .venv/bin/python bench/unseen_repos.py            # materialise them, print their folders
    .venv/bin/python bench/unseen_repos.py --check    # only verify what is there (exit 1 if not)

Qwen2.5-Coder's training data predates 2025, so quality is measured on public repositories
*created* in 2025 or later: the first commit of each, and every commit reachable from the pin, is
dated 2025 or later; none is a fork or a copy of older code, none is generated (checked at the
pins: no "Code generated"/"do not edit" files; github-mcp-server's `third-party/` holds licence
texts only). One of each language, 30-400 files of it:

| name | language | created | pin (commit date) | files of the language (names without "test") |
|---|---|---|---|---|
| openai-agents-python | Python | 2025-03-11 | db68d1c3 (2025-11-25) | 368 (234) |
| tableau-mcp | TypeScript | 2025-05-02 | 6790c669 (2026-02-27) | 245 (159) |
| github-mcp-server | Go | 2025-03-10 | bf646785 (2026-02-26) | 146 (91) |

**github-mcp-server (Go) is kept UNSEEN while tuning**: look at its per-position answers only to
report them; choose nothing by them. Its numbers are reported beside the other two.

Each is materialised at its pin under `$FASTCOMPLETE_HOME/unseen/<name>` (a git checkout, detached
at the pin): from a local mirror when one holds the commit (`$FASTCOMPLETE_MIRRORS`, default
/work/.mirror, laid out as `<owner>+<name>/repo`, a bare git directory), else from the public URL
(a shallow fetch of the pinned commit, a full clone when the host refuses that). An existing
checkout is kept when its HEAD is the pin and nothing in it was changed. Nothing is downloaded
when the server runs: the benchmarks read these folders.
"""

from __future__ import annotations

import os
import sys

# Run as a script (`python bench/NAME.py`), the repository root comes first, as under `python -m`.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from inference.paths import fastcomplete_home

DEFAULT_MIRRORS = "/work/.mirror"
MAX_FILE_BYTES = 200_000  # as `fastcomplete eval`: bigger files are data, not code people type


@dataclass(frozen=True)
class UnseenRepo:
    name: str  # the folder under $FASTCOMPLETE_HOME/unseen
    url: str
    sha: str  # the pinned commit, 40 hex digits
    language: str  # the LSP language id its positions and regions are taken from
    created: str  # the date of its first commit
    unseen: bool = False  # kept unseen while tuning: report it, choose nothing by it

    @property
    def owner_name(self) -> str:
        return self.url.removeprefix("https://github.com/").removesuffix(".git")


REPOS: tuple[UnseenRepo, ...] = (
    UnseenRepo(
        "openai-agents-python",
        "https://github.com/openai/openai-agents-python",
        "db68d1c30e9bad534697faf2650f3e42a07d4021",
        "python",
        "2025-03-11",
    ),
    UnseenRepo(
        "tableau-mcp",
        "https://github.com/tableau/tableau-mcp",
        "6790c66934f493f1df9ec09d3f7f052395086719",
        "typescript",
        "2025-05-02",
    ),
    UnseenRepo(
        "github-mcp-server",
        "https://github.com/github/github-mcp-server",
        "bf6467855c13d3b8f5cf72f8dfd9c86f8336b20b",
        "go",
        "2025-03-10",
        unseen=True,
    ),
)
BY_NAME = {r.name: r for r in REPOS}


def unseen_home() -> Path:
    return fastcomplete_home() / "unseen"


def repo_dir(repo: UnseenRepo) -> Path:
    return unseen_home() / repo.name


def pick(names: str | None) -> list[UnseenRepo]:
    """The repositories named (comma-separated), all when None."""
    if not names:
        return list(REPOS)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if unknown := [n for n in wanted if n not in BY_NAME]:
        raise SystemExit(f"unknown repositories {unknown}: choose from {list(BY_NAME)}")
    return [BY_NAME[n] for n in wanted]


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=check, capture_output=True, text=True, timeout=1800
    )


def checked_out(repo: UnseenRepo, dest: Path) -> bool:
    """`dest` is a checkout of the pin with nothing changed or added."""
    if not (dest / ".git").exists():
        return False
    head = _git("rev-parse", "HEAD", cwd=dest, check=False)
    if head.returncode != 0 or head.stdout.strip() != repo.sha:
        return False
    status = _git("status", "--porcelain", "--untracked-files=all", cwd=dest, check=False)
    return status.returncode == 0 and not status.stdout.strip()


def mirror_of(repo: UnseenRepo) -> Path | None:
    """A local bare mirror holding the pinned commit, if any."""
    base = Path(os.environ.get("FASTCOMPLETE_MIRRORS", DEFAULT_MIRRORS))
    git_dir = base / repo.owner_name.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        return None
    has = _git("--git-dir", str(git_dir), "cat-file", "-e", f"{repo.sha}^{{commit}}", check=False)
    return git_dir if has.returncode == 0 else None


def materialise(repo: UnseenRepo) -> Path:
    """The checkout of `repo` at its pin (made when missing or changed); raises if it cannot."""
    dest = repo_dir(repo)
    if checked_out(repo, dest):
        return dest
    source = mirror_of(repo)
    origin = str(source) if source is not None else repo.url
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{repo.name}-", dir=dest.parent))
    try:
        _git("init", "--quiet", cwd=tmp)
        shallow = _git("fetch", "--quiet", "--depth", "1", origin, repo.sha, cwd=tmp, check=False)
        if shallow.returncode != 0:  # a host that serves no commit by its sha: the whole history
            _git("fetch", "--quiet", origin, "+refs/heads/*:refs/remotes/origin/*", cwd=tmp)
        _git("-c", "advice.detachedHead=false", "checkout", "--quiet", repo.sha, cwd=tmp)
        if not checked_out(repo, tmp):
            raise RuntimeError(f"{repo.name}: HEAD is not {repo.sha} after the checkout")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return dest


def materialise_all(repos: Iterable[UnseenRepo]) -> dict[str, Path]:
    return {repo.name: materialise(repo) for repo in repos}


def source_files(root: Path, languages: Collection[str]) -> list[Path]:
    """The files of `languages` under `root` that the server's index would read (its skipped
    folders, the user's exclusions and what git ignores left out), sorted; as `fastcomplete eval`,
    no file with "test" in its name (tests are a kind of code of their own) and none over 200 kB."""
    from lsp_server.text.languages import EXTENSIONS
    from lsp_server.workspace.exclusions import SKIPPED_DIRS, Exclusions

    exclusions = Exclusions(root)
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not exclusions.excluded(here / d, is_dir=True)
            and not exclusions.ignored(here / d, is_dir=True)
        ]
        for name in names:
            path = here / name
            if EXTENSIONS.get(path.suffix) not in languages or "test" in name:
                continue
            if exclusions.excluded(path) or exclusions.ignored(path) or not path.is_file():
                continue
            if path.stat().st_size <= MAX_FILE_BYTES:
                found.append(path)
    return sorted(found)


def held_out_copy(root: Path, held_out: Iterable[str], parent: Path | None = None) -> Path:
    """A copy of `root` (its .git left out) named as `root`, in a new folder under `parent`, with
    the held-out files (paths relative to `root`) removed: the workspace the server is rooted
    at, so that no line cut from those files can reach the prompt through the index. The caller
    removes `result.parent` when done."""
    where = Path(tempfile.mkdtemp(prefix="fastcomplete-heldout-", dir=parent))
    dest = where / root.name
    try:
        shutil.copytree(root, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for rel in held_out:
            target = (dest / rel).resolve()
            if dest.resolve() not in target.parents:
                raise ValueError(f"{rel}: not a path inside {root}")
            target.unlink(missing_ok=True)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return dest


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repos", help=f"comma-separated, of: {', '.join(BY_NAME)} (default all)")
    parser.add_argument("--check", action="store_true", help="verify only; fetch nothing")
    args = parser.parse_args()
    missing = 0
    for repo in pick(args.repos):
        if args.check:
            ok = checked_out(repo, repo_dir(repo))
            missing += not ok
            state = "ok" if ok else "MISSING or not at the pin"
            print(f"{repo_dir(repo)}  {repo.sha[:12]}  {state}")
            continue
        path = materialise(repo)
        mark = "  (kept unseen while tuning)" if repo.unseen else ""
        print(f"{path}  {repo.language} @ {repo.sha[:12]}{mark}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
