"""bench/unseen.py's pure parts (no model, no server): the pins, the positions, the held-out copy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench import assist
from bench.unseen import cut, repo_positions, scored
from bench.unseen_repos import REPOS, UnseenRepo, held_out_copy, source_files

PY = "\n".join(
    [
        '"""A module."""',
        "",
        "import os",
        "",
        "",
        "def walk_tree(root, pattern):",
        '    """Every file under root whose name matches the pattern."""',
        "    found = []",
        "    for dirpath, _dirs, names in os.walk(root):",
        "        for name in names:",
        "            if name.endswith(pattern) and not name.startswith('.'):",
        "                found.append(os.path.join(dirpath, name))",
        "    # a comment line that is long enough to be cut, but is a comment",
        "    return sorted(found, key=lambda path: path.lower())",
        "",
    ]
)
GO = "\n".join(
    [
        "package tree",
        "",
        'import "strings"',
        "",
        "// Walk lists the names.",
        "func Walk(names []string, suffix string) []string {",
        "\tvar found []string",
        "\tfor _, name := range names {",
        "\t\tif strings.HasSuffix(name, suffix) {",
        "\t\t\tfound = append(found, strings.ToLower(name))",
        "\t\t}",
        "\t}",
        "\treturn found",
        "}",
        "",
    ]
)


def make_repo(root: Path) -> Path:
    for i in range(6):
        (root / "pkg" / f"mod{i}").mkdir(parents=True)
        (root / "pkg" / f"mod{i}" / f"walk{i}.py").write_text(PY.replace("walk_tree", f"walk{i}"))
        (root / "pkg" / f"mod{i}" / f"walk{i}.go").write_text(GO.replace("Walk", f"Walk{i}"))
    (root / "pkg" / "mod0" / "walk_test.py").write_text(PY)  # tests are left out
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "vendored.py").write_text(PY)
    return root


PYTHON_REPO = UnseenRepo("fake", "https://github.com/o/fake", "0" * 40, "python", "2025-01-01")
GO_REPO = UnseenRepo("fake-go", "https://github.com/o/fake-go", "1" * 40, "go", "2025-01-01", True)


def test_the_pins_are_full_shas_of_three_languages_one_kept_unseen() -> None:
    assert all(re.fullmatch(r"[0-9a-f]{40}", r.sha) for r in REPOS)
    assert sorted(r.language for r in REPOS) == ["go", "python", "typescript"]
    assert len({r.name for r in REPOS}) == 3
    assert sum(r.unseen for r in REPOS) == 1
    assert all(r.created >= "2025" for r in REPOS)
    assert all(r.url.startswith("https://github.com/") for r in REPOS)


def test_positions_are_deterministic_and_independent_of_where_the_checkout_is(
    tmp_path: Path,
) -> None:
    a = make_repo(tmp_path / "a" / "fake")
    b = tmp_path / "b" / "fake"
    shutil.copytree(a, b)
    for repo in (PYTHON_REPO, GO_REPO):
        first = repo_positions(repo, a, 5, seed=3)
        assert len(first) == 5
        assert first == repo_positions(repo, a, 5, seed=3)
        assert first == repo_positions(repo, b, 5, seed=3)  # relative paths, same cuts
        assert [p.key for p in first] != [p.key for p in repo_positions(repo, a, 5, seed=4)]
        assert all(p.language == repo.language and p.unseen == repo.unseen for p in first)
    # one position per file by default; never a test file, never a skipped folder
    python = repo_positions(PYTHON_REPO, a, 6, seed=0)
    assert len({p.path for p in python}) == 6
    assert not any("test" in p.path or "node_modules" in p.path for p in python)
    assert len(repo_positions(PYTHON_REPO, a, 6, seed=0, per_file=2)) == 6


def test_the_expected_rest_of_the_line_is_not_in_the_document(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "fake")
    for repo in (PYTHON_REPO, GO_REPO):
        for pos in repo_positions(repo, root, 20, seed=1, per_file=3):
            original = (root / pos.path).read_text().split("\n")
            lines = pos.document.split("\n")
            assert len(lines) == len(original)
            assert lines[pos.line] + pos.expected == original[pos.line].rstrip()
            assert lines[pos.line] == pos.before_cursor
            assert pos.expected.strip()
            # every other line untouched: the only change is the deleted rest of the line
            assert lines[: pos.line] == original[: pos.line]
            assert lines[pos.line + 1 :] == original[pos.line + 1 :]
            # a code line, not a comment, past the file's first lines, cut inside its code
            assert pos.line >= 6
            assert not original[pos.line].lstrip().startswith(("#", "//", '"""'))
            assert pos.before_cursor.strip()
            assert pos.character == len(pos.before_cursor.encode("utf-16-le")) // 2


def test_cut_deletes_the_rest_of_the_line() -> None:
    text = "a = 1\nvalue = compute(x, y)  \nb = 2"
    document, expected = cut(text, 1, 8)
    assert document == "a = 1\nvalue = \nb = 2"
    assert expected == "compute(x, y)"


def test_the_held_out_files_are_not_in_the_workspace(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "fake")
    positions = repo_positions(PYTHON_REPO, root, 3, seed=0)
    held = {p.path for p in positions}
    copy = held_out_copy(root, held, tmp_path)
    try:
        assert copy.name == root.name and copy.parent != root.parent
        assert not (copy / ".git").exists()
        for rel in held:
            assert (root / rel).exists() and not (copy / rel).exists()
        left = {p.relative_to(copy).as_posix() for p in source_files(copy, {"python", "go"})}
        everything = {p.relative_to(root).as_posix() for p in source_files(root, {"python", "go"})}
        assert left == everything - held
        with pytest.raises(ValueError):
            held_out_copy(root, ["../outside.py"], tmp_path)
        assert [p.name for p in tmp_path.glob("fastcomplete-heldout-*")] == [copy.parent.name]
    finally:
        shutil.rmtree(copy.parent)


def test_scored_takes_the_first_line_stripped() -> None:
    assert scored("foo(x)\n    bar()", " foo(x)") == (True, 1.0)
    assert scored("", "x")[0] is False
    assert scored("  ", "  ")[0] is False  # nothing shown is never right
    assert scored("fob", "foo") == (False, pytest.approx(2 / 3))


def test_assist_regions_from_a_workspace_keep_their_language_and_relative_path(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "fake")
    regions = assist.regions(4, 0, 300, root, languages={"go"})
    assert regions
    for region in regions:
        assert region.language == "go" and region.path.endswith(".go")
        assert (root / region.path).exists()
        assert region.before + region.typed + region.after == (root / region.path).read_text()
