"""`fastcomplete eval` on a small tree of its own, with the tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from lsp_server.cli.evaluation import collect_cases, edit_similarity, evaluate, invents_a_name
from lsp_server.completion.plan import PipelineOptions

CODE = "\n".join(
    [
        "import os",
        "",
        "",
        "def list_python_files(root):",
        '    """Every .py file under root."""',
        "    found = []",
        "    for dirpath, _dirs, names in os.walk(root):",
        "        for name in names:",
        '            if name.endswith(".py"):',
        "                found.append(os.path.join(dirpath, name))",
        "    return sorted(found, key=lambda path: path.lower())",
        "",
    ]
)


def test_edit_similarity() -> None:
    assert edit_similarity("abc", "abc") == 1.0
    assert edit_similarity("abc", "abd") == pytest.approx(2 / 3)
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("", "xy") == 0.0


def test_invented_names_count_the_identifier_finished_at_the_cursor() -> None:
    known = {"config", "load", "x"}
    doc = "x = conf"
    assert not invents_a_name(doc, len(doc), "ig.load()", known)
    assert invents_a_name(doc, len(doc), "iguration", known)  # "configuration": nowhere
    assert invents_a_name(doc, len(doc), "ig.reload()", known)
    assert not invents_a_name("x = ", 4, "", known)


def test_cases_are_deterministic_cuts_inside_real_lines(tmp_path: Path) -> None:
    (tmp_path / "walk.py").write_text(CODE)
    (tmp_path / "notes.txt").write_text("not code")
    cases = collect_cases([tmp_path], None, n=10, seed=3)
    assert cases == collect_cases([tmp_path], None, n=10, seed=3)
    assert 0 < len(cases) <= 4
    lines = CODE.split("\n")
    for case in cases:
        original = lines[case.line]
        typed = case.document.split("\n")[case.line]
        assert original == typed + case.expected  # the rest of the line was deleted
        assert case.expected and typed.strip()
        assert case.language == "python"
    assert collect_cases([tmp_path], "go", n=10) == []


def test_evaluate_runs_the_server_pipeline(tmp_path: Path, tiny_model: Path) -> None:
    (tmp_path / "walk.py").write_text(CODE)
    cases = collect_cases([tmp_path], None, n=4, seed=1)
    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast",
            standard_dir=tiny_model / "standard",
            cache_dir=None,
            cache_memory_items=0,
        )
    )
    engine.load("fast")
    summary = evaluate(engine, cases, fast_mode=True, options=PipelineOptions()).summary()
    assert summary["cases"] == len(cases)
    assert 0 <= summary["edit_similarity"] <= 100
    assert summary["latency_p50_ms"] > 0
    assert engine.stats()["models"]["tiny-llama/fast"]["requests"] >= len(cases)
