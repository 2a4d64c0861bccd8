"""The GPU default chosen at run time: fits the GPU's memory, fast enough there, best otherwise."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from inference import device
from inference.engine import Engine, EngineConfig
from inference.manifest import read_manifest, write_manifest
from models import choice as model_choice
from models.catalogue import CATALOGUE
from models.choice import (
    DEFAULT_MODEL,
    Candidate,
    Gpu,
    choose_gpu_model,
    default_model,
    rank,
    serving_bytes,
)
from models.fast_choice import FAST_BITS
from models.tiny import TINY_NAME

GB = 1 << 30
KV = 768 << 20


def catalogue_candidates() -> list[Candidate]:
    return [
        Candidate(e.name, e.fim, e.params_m, serving_bytes(e.params_m, FAST_BITS["cuda"], KV))
        for e in CATALOGUE.values()
    ]


def big(name: str = "qwen2.5-coder-7b", params_m: int = 7600) -> Candidate:
    return Candidate(name, True, params_m, serving_bytes(params_m, 16, KV))


def test_rank_orders_the_catalogue_as_its_measured_exact_match_does() -> None:
    by_rank = sorted(
        CATALOGUE.values(), key=lambda e: rank(Candidate(e.name, e.fim, e.params_m, 0))
    )
    assert all(e.exact_match is not None for e in by_rank)
    assert [e.exact_match for e in by_rank] == sorted(e.exact_match for e in by_rank)


def test_a_laptop_gpu_gets_the_largest_model_that_fits_and_was_measured_on_a_gpu() -> None:
    laptop = Gpu("RTX 4060 Laptop", 8 * GB)
    everything = [*catalogue_candidates(), big()]
    assert choose_gpu_model(everything, laptop, {}, DEFAULT_MODEL).model == "qwen2.5-coder-1.5b"
    small = Gpu("Quadro P1000", 3 * GB)  # 2.7 GB usable: only SmolLM2 with its KV fits
    assert choose_gpu_model(everything, small, {}, DEFAULT_MODEL).model == "smollm2-135m"
    tiny = Gpu("nothing fits", GB // 2)
    choice = choose_gpu_model(everything, tiny, {}, DEFAULT_MODEL)
    assert choice.model == DEFAULT_MODEL and "nothing measured fits" in choice.reason


def test_a_larger_model_is_chosen_only_once_measured_within_the_budget() -> None:
    h200 = Gpu("NVIDIA H200", 141 * GB)
    everything = [*catalogue_candidates(), big()]
    # Never timed there: a 7B is not started on faith.
    assert choose_gpu_model(everything, h200, {}, DEFAULT_MODEL).model == "qwen2.5-coder-1.5b"
    fast = choose_gpu_model(everything, h200, {"qwen2.5-coder-7b": 120.0}, DEFAULT_MODEL)
    assert fast.model == "qwen2.5-coder-7b" and "120 ms p95" in fast.reason
    # Measured too slow: the best of the rest.
    slow = {"qwen2.5-coder-7b": 310.0, "qwen2.5-coder-1.5b": 90.0}
    assert choose_gpu_model(everything, h200, slow, DEFAULT_MODEL).model == "qwen2.5-coder-1.5b"
    # Memory first: a 7B measured fast elsewhere does not fit 8 GB.
    laptop = Gpu("RTX 4060 Laptop", 8 * GB)
    assert choose_gpu_model(
        everything, laptop, {"qwen2.5-coder-7b": 100.0}, DEFAULT_MODEL
    ).model == ("qwen2.5-coder-1.5b")


def test_an_engine_config_asks_for_no_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine is told which model to load: making its config probes no GPU and reads no
    models folder (the server's, the CLI's and the test fake's configs alike)."""

    def probe(*args: object) -> None:
        raise AssertionError("EngineConfig() asked for this machine's default model")

    for name in ("default_choice", "gpu_info", "candidates"):
        monkeypatch.setattr(model_choice, name, probe)
    monkeypatch.setattr(device, "gpu_present", probe)
    assert EngineConfig().model_name is None
    with pytest.raises(ValueError, match="names no model"):
        Engine(EngineConfig())


@pytest.fixture
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gpu]:
    """An nvidia-smi on PATH describing an 8 GB laptop GPU, and a GPU runtime said present."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA GeForce RTX 4060 Laptop GPU, 8188'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(device, "gpu_present", lambda: True)
    monkeypatch.setattr(device, "cuda_runtime_installed", lambda: True)
    model_choice.gpu_info.cache_clear()  # asked once per process: this test's GPU is another
    yield Gpu("NVIDIA GeForce RTX 4060 Laptop GPU", 8188 << 20)
    model_choice.gpu_info.cache_clear()


def test_default_model_asks_the_gpu(fake_gpu: Gpu, home: Path) -> None:
    assert model_choice.gpu_info() == fake_gpu
    assert default_model() == "qwen2.5-coder-1.5b"
    model_choice.record_p95(fake_gpu, "qwen2.5-coder-1.5b", 400.0)  # too slow on this card
    model_choice.record_p95(fake_gpu, "qwen2.5-coder-0.5b", 60.0)
    assert model_choice.measured_p95(fake_gpu) == {
        "qwen2.5-coder-1.5b": 400.0,
        "qwen2.5-coder-0.5b": 60.0,
    }
    assert default_model() == "qwen2.5-coder-0.5b"
    # Another GPU's measurements are not this one's.
    other = json.loads(model_choice.measured_path().read_text())
    assert set(other) == {fake_gpu.name}


def test_a_model_built_from_a_named_file_is_a_candidate(tiny_model: Path, home: Path) -> None:
    """A GPU build of a GGUF the person named (e.g. a 7B): its size is read from its files."""
    for variant in ("standard", "fast"):
        manifest = read_manifest(tiny_model / variant)
        folder = home / "models" / "my-coder" / variant
        folder.mkdir(parents=True)
        write_manifest(folder, replace(manifest, name="my-coder", precision="fp16"))
    found = {c.name: c for c in model_choice.candidates(KV)}
    assert set(CATALOGUE) < set(found) and TINY_NAME not in found  # the CPU build is not
    assert found["my-coder"].fim == (read_manifest(tiny_model / "fast").fim is not None)
    assert found["my-coder"].memory_bytes > KV


def test_models_measure_times_the_first_suggestion(home_with_tiny: Path, capsys) -> None:
    from lsp_server.cli.main import main

    if device.gpu_present():
        pytest.skip("this machine has a GPU: the command would record it")
    assert main(["models", "measure"]) == 2
    assert "no GPU" in capsys.readouterr().err
    assert main(["models", "measure", "--model", TINY_NAME, "--allow-cpu"]) == 0
    out = capsys.readouterr().out
    assert f"{TINY_NAME} (cpu): p50" in out and "budget" in out
    recorded = model_choice.measured_p95(Gpu("cpu", 0))
    assert recorded[TINY_NAME] > 0
