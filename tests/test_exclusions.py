from __future__ import annotations

from pathlib import Path

import pytest

from lsp_server.workspace.exclusions import Exclusions


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".env.production",
        "config/.env.local",
        "deploy/prod.env",
        "server.pem",
        "tls/private.key",
        "id_rsa",
        "id_ed25519.pub",
        "cert.p12",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "credentials",
        "credentials.json",
        "gcp-credentials-prod.json",
        ".aws/config",
        "home/.ssh/known_hosts",
        "app/secrets.yaml",
        "terraform.tfvars",
    ],
)
def test_defaults_exclude_secrets(tmp_path: Path, name: str) -> None:
    assert Exclusions(tmp_path).excluded(tmp_path / name)


@pytest.mark.parametrize(
    "name", ["app.py", "src/environment.ts", "keys.py", "docs/ssh.md", "envelope.go"]
)
def test_defaults_keep_source(tmp_path: Path, name: str) -> None:
    assert not Exclusions(tmp_path).excluded(tmp_path / name)


def test_secrets_excluded_outside_the_root_and_without_one(tmp_path: Path) -> None:
    inside = Exclusions(tmp_path / "project")
    for exclusions in (inside, Exclusions(None)):
        assert exclusions.excluded("/home/u/.env")
        assert exclusions.excluded(Path("/home/u/.ssh/config"))
        assert exclusions.excluded("file:///x/id_rsa")
        assert not exclusions.excluded("/home/u/code/main.py")


def test_only_the_last_parts_of_an_outside_path_count(tmp_path: Path) -> None:
    # A project that lies in a folder named like a pattern is not excluded for that.
    exclusions = Exclusions(None)
    assert not exclusions.excluded("/home/u/credentials/tool/src/main.py")
    assert exclusions.excluded("/home/u/credentials/tool/src/.env")


def test_file_uris_are_percent_decoded(tmp_path: Path) -> None:
    root = tmp_path / "my project"
    write(root / ".fastcompleteignore", "private notes.md\n")
    exclusions = Exclusions(root)
    uri = (root / "private notes.md").as_uri()
    assert "%20" in uri
    assert exclusions.excluded(uri)
    assert exclusions.excluded("file://" + str(root).replace(" ", "%20") + "/sub/%2Eenv")
    assert not exclusions.excluded((root / "main.py").as_uri())


def test_other_schemes_match_by_name_only() -> None:
    exclusions = Exclusions(None)
    assert not exclusions.excluded("untitled:Untitled-1")
    assert exclusions.excluded("vscode-remote://ssh-remote+box/home/u/.env")
    assert not exclusions.excluded("vscode-notebook-cell:/home/u/nb.ipynb#W0sZmlsZQ%3D%3D")


def test_fastcompleteignore(tmp_path: Path) -> None:
    write(tmp_path / ".fastcompleteignore", "# comment\nvendor/\n*.generated.ts\n!secrets.py\n")
    write(tmp_path / "vendor" / "lib.py")
    exclusions = Exclusions(tmp_path)
    assert exclusions.excluded(tmp_path / "vendor" / "lib.py")
    assert exclusions.excluded(tmp_path / "vendor")
    assert exclusions.excluded((tmp_path / "web" / "api.generated.ts").as_uri())
    assert not exclusions.excluded(tmp_path / "web" / "api.ts")
    # The user's `!pattern` re-includes what a default excludes.
    assert not exclusions.excluded(tmp_path / "secrets.py")
    assert exclusions.excluded(tmp_path / "secrets.json")
    # Patterns are the root's: they do not apply to files elsewhere.
    assert not exclusions.excluded(tmp_path.parent / "elsewhere" / "vendor" / "lib.py")


def test_reload_reads_the_ignore_file_again(tmp_path: Path) -> None:
    exclusions = Exclusions(tmp_path)
    assert not exclusions.excluded(tmp_path / "notes.py")
    write(tmp_path / ".fastcompleteignore", "notes.py\n")
    assert not exclusions.excluded(tmp_path / "notes.py")
    exclusions.reload()
    assert exclusions.excluded(tmp_path / "notes.py")


def test_gitignore_root_nested_and_info_exclude(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.log\nout/\n")
    write(tmp_path / ".git" / "info" / "exclude", "scratch.py\n")
    write(tmp_path / "pkg" / ".gitignore", "generated.py\n/local.py\n")
    for name in ("a.log", "out/x.py", "scratch.py", "pkg/generated.py", "pkg/local.py"):
        write(tmp_path / name)
    write(tmp_path / "pkg" / "deep" / "local.py")
    write(tmp_path / "generated.py")
    exclusions = Exclusions(tmp_path)
    assert exclusions.ignored(tmp_path / "a.log")
    assert exclusions.ignored(tmp_path / "out")
    assert exclusions.ignored(tmp_path / "out" / "x.py")
    assert exclusions.ignored(tmp_path / "scratch.py")
    # A nested .gitignore's patterns are relative to its own folder.
    assert exclusions.ignored(tmp_path / "pkg" / "generated.py")
    assert exclusions.ignored(tmp_path / "pkg" / "local.py")
    assert not exclusions.ignored(tmp_path / "pkg" / "deep" / "local.py")
    assert not exclusions.ignored(tmp_path / "generated.py")
    assert not exclusions.ignored(tmp_path / "main.py")
    # Ignored is not excluded: an ignored file that is open is still completed.
    assert not exclusions.excluded(tmp_path / "a.log")


def test_gitignore_negation(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.py\n!keep.py\n")
    write(tmp_path / "sub" / ".gitignore", "!also.py\n")
    exclusions = Exclusions(tmp_path)
    assert exclusions.ignored(tmp_path / "drop.py")
    assert not exclusions.ignored(tmp_path / "keep.py")
    assert not exclusions.ignored(tmp_path / "sub" / "keep.py")
    # The deeper file has the last word.
    assert not exclusions.ignored(tmp_path / "sub" / "also.py")
    assert exclusions.ignored(tmp_path / "sub" / "other.py")


def test_nothing_in_an_ignored_folder_comes_back(tmp_path: Path) -> None:
    # As in git: a `!pattern` cannot re-include a file whose folder is ignored.
    write(tmp_path / ".gitignore", "logs/\n!logs/keep.py\n")
    write(tmp_path / "logs" / "keep.py")
    assert Exclusions(tmp_path).ignored(tmp_path / "logs" / "keep.py")


def test_reload_forgets_cached_gitignores(tmp_path: Path) -> None:
    exclusions = Exclusions(tmp_path)
    assert not exclusions.ignored(tmp_path / "pkg" / "a.py")
    write(tmp_path / "pkg" / ".gitignore", "a.py\n")
    exclusions.reload()
    assert exclusions.ignored(tmp_path / "pkg" / "a.py")


def test_paths_outside_the_root_are_never_ignored(tmp_path: Path) -> None:
    write(tmp_path / "root" / ".gitignore", "*.py\n")
    exclusions = Exclusions(tmp_path / "root")
    assert exclusions.ignored(tmp_path / "root" / "a.py")
    assert not exclusions.ignored(tmp_path / "other" / "a.py")
    assert not Exclusions(None).ignored(tmp_path / "root" / "a.py")


def test_a_bad_pattern_is_skipped_and_reported_not_fatal(tmp_path: Path) -> None:
    write(tmp_path / ".fastcompleteignore", "vendor/\n!\n[z-a].py\n*.generated.ts\n")
    write(tmp_path / ".gitignore", "build/\n\\\n")  # a lone backslash
    exclusions = Exclusions(tmp_path)
    assert exclusions.excluded(tmp_path / "vendor" / "lib.py")
    assert exclusions.excluded(tmp_path / "api.generated.ts")
    assert exclusions.ignored(tmp_path / "build" / "x.py")
    assert [p.split(":")[:2] for p in exclusions.problems] == [
        [".fastcompleteignore", "2"],
        [".fastcompleteignore", "3"],
        [".gitignore", "2"],
    ]
