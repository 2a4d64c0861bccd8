"""The fast model's weights chosen by measurement (models/fast_choice.py; bench/fast_choice
measures), and the build recording it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import fast_choice
from lsp_server.cli.main import main as cli_main
from models.fast_choice import BitsCandidate, choose
from models.tiny import TINY_NAME


def row(bits: int, ms: float, agreement: float, gate: float = 0.95) -> BitsCandidate:
    return BitsCandidate(bits, f"int{bits}", ms, agreement, gate)


def test_the_fastest_passing_candidate_wins() -> None:
    assert choose([row(16, 3.2, 1.0), row(8, 3.6, 0.97), row(4, 1.9, 0.93, 0.90)]) == 4
    # A faster candidate below its gate loses to a slower one that passes.
    assert choose([row(16, 3.2, 1.0), row(8, 2.0, 0.91), row(4, 1.9, 0.85, 0.90)]) == 16
    assert choose([row(16, 2.0, 1.0), row(8, 2.0, 0.99)]) == 16  # a tie keeps more bits
    with pytest.raises(ValueError, match="no candidate"):
        choose([row(8, 1.0, 0.5)])


def test_measures_each_candidate_and_the_build_records_the_pick(
    home_with_tiny: Path, tmp_path: Path, capsys
) -> None:
    report = tmp_path / "choice.json"
    args = ["--model", TINY_NAME, "--bits", "16,8", "--context", "48", "--allow-cpu"]
    assert fast_choice.main([*args, "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    rows = {r["bits"]: r for r in data["rows"]}
    assert set(rows) == {16, 8} and data["chosen_bits"] in rows
    assert rows[16]["agreement"] == 1.0 and 0 < rows[8]["agreement"] <= 1.0
    assert all(r["decode_ms"] > 0 for r in rows.values())
    assert "<- chosen" in capsys.readouterr().out
    # The build takes the pick and keeps what was measured (CUDA graphs, built on the CPU here).
    data["chosen_bits"] = 8
    report.write_text(json.dumps(data))
    assert cli_main(["models", "build", "--tiny", "--cuda", "--fast-choice", str(report)]) == 0
    manifest = json.loads(
        (home_with_tiny / "models" / TINY_NAME / "fast" / "manifest.json").read_text()
    )
    assert manifest["precision"] == "int8-weight-only"
    assert manifest["fast_choice"]["bits"] == 8
    assert manifest["fast_choice"]["measured"] == data["rows"]


def test_no_gpu_no_measurement(tiny_model: Path, capsys) -> None:
    from inference.device import gpu_present

    if gpu_present():
        pytest.skip("this machine has a GPU")
    assert fast_choice.main(["--model", TINY_NAME]) == 2
    assert "no GPU" in capsys.readouterr().err
