"""What the rest of the repository lends a prompt (snippets, definitions), chosen per block of the
cursor, and the code after the cursor that ranks candidates."""

from __future__ import annotations

from pathlib import Path

from lsp_server.completion.plan import scoring_suffix
from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.snippets import RepoSources, SnippetChooser

SHAPES = '''import math


def circle_area(radius: float) -> float:
    """Area of a circle."""
    return math.pi * radius**2


def ring_area(outer_radius: float, inner_radius: float) -> float:
    return circle_area(outer_radius) - circle_area(inner_radius)
'''
DOC = "from shapes import ring_area\n\n\ndef washer(outer_radius, inner_radius):\n    return ring_"


def _repo(tmp_path: Path) -> tuple[WorkspaceIndex, Exclusions]:
    (tmp_path / "shapes.py").write_text(SHAPES)
    (tmp_path / "main.py").write_text(DOC + "area(outer_radius, inner_radius)\n")
    (tmp_path / "id_rsa").write_text("ring_area outer_radius inner_radius\n")
    exclusions = Exclusions(tmp_path)
    index = WorkspaceIndex(tmp_path, None, exclusions=exclusions)
    index.build()
    return index, exclusions


def test_definitions_and_snippets_come_from_other_files_not_the_open_ones(tmp_path: Path) -> None:
    index, exclusions = _repo(tmp_path)
    chooser = SnippetChooser(lambda: 2000)
    uri = (tmp_path / "main.py").as_uri()
    picked = chooser.choose(uri, DOC, 4, RepoSources((), index, exclusions))
    text = "\n".join(s.text for s in picked)
    assert "def ring_area(outer_radius: float, inner_radius: float) -> float:" in text
    assert {s.path for s in picked} == {"shapes.py"}  # main.py's saved copy is the open file
    # Definitions sit last, nearest the code.
    assert picked[-1].text.startswith("def ring_area")


def test_the_choice_holds_for_a_block_and_follows_the_index(tmp_path: Path) -> None:
    index, exclusions = _repo(tmp_path)
    chooser = SnippetChooser(lambda: 2000)
    uri = (tmp_path / "main.py").as_uri()
    sources = RepoSources((), index, exclusions)
    first = chooser.choose(uri, DOC, 4, sources)
    typed = chooser.choose(uri, DOC + "area(", 4, sources)
    assert typed is first  # same block, same index: the prompt's start stays put
    (tmp_path / "shapes.py").write_text(SHAPES.replace("ring_area", "annulus_area"))
    index.update(tmp_path / "shapes.py")
    after = chooser.choose(uri, DOC, 4, sources)
    assert "def ring_area" not in "\n".join(s.text for s in after)


def test_excluded_open_documents_lend_nothing(tmp_path: Path) -> None:
    index, exclusions = _repo(tmp_path)
    chooser = SnippetChooser(lambda: 2000)
    secret = ((tmp_path / ".env").as_uri(), "RING_AREA_TOKEN=ring_area outer_radius inner_radius")
    plain = (
        "file:///elsewhere/notes.py",
        "def washer_notes(outer_radius, inner_radius): ring_area",
    )
    uri = (tmp_path / "main.py").as_uri()
    picked = chooser.choose(uri, DOC, 4, RepoSources((secret, plain), index, exclusions))
    text = "\n".join(s.text for s in picked)
    assert "RING_AREA_TOKEN" not in text
    assert "washer_notes" in text


def test_ablations_switch_each_source_off(tmp_path: Path) -> None:
    index, exclusions = _repo(tmp_path)
    uri = (tmp_path / "main.py").as_uri()
    no_defs = SnippetChooser(lambda: 2000).choose(
        uri, DOC, 4, RepoSources((), index, exclusions, definitions=False)
    )
    assert all(not s.text.startswith("def ring_area(outer") for s in no_defs)
    nothing = SnippetChooser(lambda: 2000).choose(
        uri, DOC, 4, RepoSources((), index, exclusions, definitions=False, index_snippets=False)
    )
    assert nothing == []


def test_scoring_suffix_is_the_rest_of_the_line_and_the_next_code_lines() -> None:
    text = "x = f(\n\n    a,\n    b)\nprint(x)\n"
    assert scoring_suffix(text, len("x = f(")) == "\n\n    a,\n    b)"
    assert scoring_suffix("y = 1\n   \n", 5) == ""
    long = "z = " + "a" * 500
    assert len(scoring_suffix(long, 0)) == 120
