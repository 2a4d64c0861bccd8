"""bench/gpu_real: the prepared real-weights GPU run, checked here without a GPU (its plan, the
command line of every step, and the carry's pieces)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import gpu_real
from bench.gpu_real import Step, accepted, join, split

MEASUREMENTS = {
    "gpu_check",
    "fast_choice",
    "models_measure",
    "eval-mcp-python",
    "eval-mcp-js",
    "eval-fastcomplete-ca1da2e",
    "first_ask",
    "typing_replay",
    "assist",
    "explain_speed",
}


def test_the_dry_run_accepts_every_steps_command_line(tmp_path: Path, capsys) -> None:
    assert gpu_real.main(["run", "--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in MEASUREMENTS:
        assert f"gpu_real: {name} (" in out
    assert out.count(": accepted") == len(MEASUREMENTS) and "REFUSED" not in out
    plan = gpu_real.steps("m", tmp_path, tmp_path / "repos")
    assert {s.name for s in plan} == MEASUREMENTS
    assert all(str(tmp_path) in " ".join(s.argv) for s in plan if "--json" in s.argv)


def test_a_command_line_its_program_refuses_is_reported(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "FASTCOMPLETE_HOME": str(tmp_path)}
    why = accepted(Step("bad", ("-m", "bench.first_ask", "--no-such-flag"), 1), env)
    assert why is not None and "--no-such-flag" in why
    with pytest.raises(SystemExit, match="no step"):
        gpu_real.main(["run", "--dry-run", "--steps", "nonsense", "--out", str(tmp_path)])


def test_pieces_join_only_when_every_one_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_real, "PIECE_BYTES", 1000)
    bundle = tmp_path / "bundle.tar"
    data = bytes(range(256)) * 10  # 2,560 bytes: three pieces
    bundle.write_bytes(data)
    carry = tmp_path / "carry"
    pieces = split(bundle, carry)
    assert [p.parent.name for p in pieces] == ["00", "01", "02"]
    assert all(p.stat().st_size <= 1000 for p in pieces)
    join(carry, tmp_path / "joined")
    assert (tmp_path / "joined").read_bytes() == data
    # The dry run checks a carry too.
    dry = ["run", "--dry-run", "--carry", str(carry), "--steps", "assist", "--out", str(tmp_path)]
    assert gpu_real.main(dry) == 0
    pieces[1].write_bytes(b"x" + pieces[1].read_bytes()[1:])
    with pytest.raises(SystemExit, match="01/piece: sha256 differs"):
        join(carry, tmp_path / "joined")
    pieces[1].unlink()
    with pytest.raises(SystemExit, match="01/piece was not carried"):
        join(carry, tmp_path / "joined")


def test_prepare_says_what_is_missing_before_downloading(home: Path, capsys) -> None:
    assert gpu_real.main(["prepare", "--dry-run", "--model", "qwen2.5-coder-1.5b"]) == 1
    err = capsys.readouterr().err
    assert "missing GGUF" in err and "eval repository" in err


@pytest.mark.slow
def test_the_device_build_from_the_gguf_predicts_as_the_build_here(
    code_model: Path, home: Path, tmp_path: Path
) -> None:
    """What `run` does on the lent machine after unpacking, done here with the builder's Python
    (transformers 5, as there): GGUF -> FP16 weights -> CUDA graphs -> manifests. A model whose
    weights did not load would decode noise; this one decodes what the CPU build decodes."""
    import json
    import os
    import shutil
    import subprocess

    from inference.model import load_model_dir
    from models.catalogue import entry
    from models.genai_build import builder_python

    name = code_model.name
    work = tmp_path / "work"
    for folder in ("gguf", "hf", "manifests"):
        (work / folder).mkdir(parents=True)
    source = code_model.parent.parent / "sources" / name / entry(name).gguf
    (work / "gguf" / source.name).symlink_to(source)
    for file in gpu_real.HF_FILES:
        shutil.copy2(code_model / "hf" / file, work / "hf" / file)
    for variant in ("standard", "fast"):
        shutil.copy2(code_model / variant / "manifest.json", work / "manifests" / f"{variant}.json")
    env = dict(os.environ, FASTCOMPLETE_HOME=str(home), PYTHONPATH=str(gpu_real.REPO))
    out = subprocess.run(
        [
            str(builder_python()),
            "-m",
            "bench.gpu_real",
            "build",
            "--work",
            str(work),
            "--model",
            name,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=gpu_real.REPO,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sample NLL" in out.stdout
    built = home / "models" / name
    fast = json.loads((built / "fast" / "manifest.json").read_text())
    assert fast["precision"] == "fp16" and fast["fast_choice"]["bits"] == 16

    def greedy(directory: Path) -> list[int]:
        model = load_model_dir(directory, verify_hashes=True)
        ids = model.tokenizer.encode(
            "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
        )
        slot, _ = model.pool.lease(ids)
        logits, tokens = model.runner.forward(slot, ids), []
        for _ in range(10):
            tokens.append(int(logits[-1].argmax()))
            logits = model.runner.forward(slot, tokens[-1:])
        return tokens

    assert greedy(built / "standard") == greedy(code_model / "standard")
    shutil.rmtree(built)  # FP16 weights and graphs: gigabytes a CI machine needs back
