"""`fastcomplete eval` on a small tree of its own, with the tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from lsp_server.cli.evaluation import (
    Case,
    collect_cases,
    edit_similarity,
    evaluate,
    invents_a_name,
)
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


async def test_the_eval_plans_the_prompt_an_editor_gets(tmp_path: Path, home: Path) -> None:
    """The eval goes through the server's own planner: for the same open document and cursor,
    its prompt is the one the running service would prefill (the window above the cursor, the
    recent-edits and names steps included)."""
    from lsp_server.cli.evaluation import EVAL_SETTINGS, LoadedWorkspace, eval_planner, opened
    from lsp_server.service import CompletionService
    from lsp_server.workspace.exclusions import Exclusions
    from tests.fake_engine import FakeEngine, engine_factory

    (tmp_path / "walk.py").write_text(CODE)
    engine = FakeEngine()
    case = collect_cases([tmp_path], None, n=1, seed=3)[0]
    planner = eval_planner(
        engine, EVAL_SETTINGS, LoadedWorkspace(None, Exclusions(None)), PipelineOptions()
    )
    snap, view = opened(planner, case)
    eval_prompt = planner.plan(snap, view).prompt

    service = CompletionService(make_engine=engine_factory(FakeEngine()))
    service.apply_settings({"multiline": EVAL_SETTINGS.multiline})
    await service.load_models()
    uri = (tmp_path / "walk.py").resolve().as_uri()
    service.open(uri, case.document, 1, case.language)
    position = {"line": case.line, "character": case.character}
    served = service.debug_document([{"uri": uri, "position": position}])["prompt"]
    assert eval_prompt == served and eval_prompt.strip()


def test_the_workspace_eval_runs_each_row_through_the_planner(tmp_path: Path, home: Path) -> None:
    from lsp_server.cli.evaluation import WORKSPACE_ROWS, run_workspace_eval, workspace_cases
    from lsp_server.workspace.exclusions import Exclusions
    from tests.fake_engine import FakeEngine

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "walk.py").write_text(CODE)
    (repo / "util.py").write_text("def list_python_files(root):\n    return []\n")
    cases = workspace_cases(repo, 2, 3, Exclusions(repo))

    # The script answers each case's own expected rest, so every row scores every case.
    def before_cursor(case: Case) -> str:
        lines = case.document.split("\n")
        return "\n".join([*lines[: case.line], lines[case.line][: case.character]])

    expected = {before_cursor(c)[-24:]: c.expected for c in cases}

    def script(variant: str, prompt: str) -> str:
        return next((rest for end, rest in expected.items() if prompt.endswith(end)), "")

    engine = FakeEngine(script)
    report = run_workspace_eval(engine, repo, cases, WORKSPACE_ROWS, ("fast",), tmp_path / "ix")
    assert set(report) == set(WORKSPACE_ROWS)
    for row in report.values():
        assert row["fast"]["cases"] == len(cases) and row["fast"]["exact_match"] == 100.0
    assert any(call.variant == "fast" for call in engine.calls)
