"""`fastcomplete doctor`: each check says what this machine will use and what to do about it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_server.cli import doctor
from lsp_server.cli.main import main
from lsp_server.config import editors
from models.tiny import TINY_NAME


def by_area(checks: list[doctor.Check], area: str) -> list[doctor.Check]:
    return [c for c in checks if c.area == area]


def test_a_new_machine_is_told_to_build_the_default_model(home: Path, capsys) -> None:
    assert main(["doctor", "--json"]) == 1  # an error: nothing to serve yet
    checks = [doctor.Check(**c) for c in json.loads(capsys.readouterr().out)]
    model = by_area(checks, "model")
    assert model[0].level == "info" and "default model" in model[0].message
    errors = [c for c in model if c.level == "error"]
    assert errors and errors[0].advice.startswith("fastcomplete models build --model ")
    assert by_area(checks, "device")[0].level in ("ok", "info", "warn")
    assert "Python" in by_area(checks, "versions")[0].message
    assert by_area(checks, "editors")[0].message == "no editor has started the server yet"


def test_a_built_model_and_the_editors_settings(
    home_with_tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("FASTCOMPLETE_MODEL", TINY_NAME)
    editors.record_editor(
        "Neovim", {"fastMode": False, "remote": {"url": "http://x", "apiKey": "s3cret"}}
    )
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"{TINY_NAME}/fast built" in out and f"{TINY_NAME}/standard built" in out
    assert "FASTCOMPLETE_MODEL" in out
    assert "Neovim, last" in out and '"fastMode": false' in out
    assert "s3cret" not in out and "s3cret" not in editors.editors_path().read_text()
    assert "MB" in out  # the home folder's size


def test_a_broken_model_says_how_to_rebuild(
    home_with_tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FASTCOMPLETE_MODEL", TINY_NAME)
    (home_with_tiny / "models" / TINY_NAME / "fast" / "model.onnx").write_bytes(b"broken")
    errors = [c for c in doctor.run_checks() if c.level == "error"]
    assert errors and errors[0].advice.endswith("--force")


def test_a_check_that_fails_does_not_hide_the_others(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> list[doctor.Check]:
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "device", broken)
    checks = doctor.run_checks()
    assert any(c.area == "broken" and "boom" in c.message for c in checks)
    assert by_area(checks, "model")
