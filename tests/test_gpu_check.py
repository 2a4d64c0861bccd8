"""bench/gpu_check: says so where there is no GPU; its measurements run on the CPU provider."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import gpu_check
from inference.session import gpu_present
from models.tiny import TINY_NAME

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU: the script would run for real")
def test_the_script_says_there_is_no_gpu_before_installing_anything(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GPU_CHECK_OUT": str(tmp_path / "out")},
        check=False,
    )
    assert out.returncode == gpu_check.NO_GPU, out.stderr
    assert "no NVIDIA GPU" in out.stderr


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_the_check_refuses_to_measure_the_cpu_unless_asked(tiny_model: Path, capsys) -> None:
    assert gpu_check.main(["--model", TINY_NAME]) == gpu_check.NO_GPU
    assert "no GPU to check" in capsys.readouterr().err


def test_placement_kv_device_and_timings_on_the_cpu_provider(
    tiny_model: Path, tmp_path: Path, capsys
) -> None:
    report = tmp_path / "gpu.json"
    args = ["--model", TINY_NAME, "--contexts", "16,40", "--reps", "1", "--json", str(report)]
    assert gpu_check.main([*args, "--allow-cpu"]) == 0
    printed = capsys.readouterr().out
    rows = json.loads(report.read_text())
    assert [r["variant"] for r in rows] == ["fast", "standard"]
    for row in rows:
        assert "CPUExecutionProvider" in row["providers"]
        # The profiled pass saw the graph's nodes, on the one provider there is.
        assert set(row["nodes_by_provider"]) == {"CPUExecutionProvider"}
        assert row["nodes_by_provider"]["CPUExecutionProvider"] > 10
        assert row["kv_device"].lower() == "cpu"  # the shared KV buffers, bound through IOBinding
        assert set(row["prefill_ms"]) == {"16", "40"} and all(
            v > 0 for v in row["decode_ms"].values()
        )
        # The fixed-shape decode binding (what a CUDA graph captures) chose the same tokens.
        assert row["cuda_graph"] is False and row["graph_same_tokens"] is True
        assert set(row["graph_decode_ms"]) == {"16", "40"}
    assert "KV buffers (IOBinding)" in printed and "fixed binding, no capture" in printed
