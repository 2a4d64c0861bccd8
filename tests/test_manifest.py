from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.manifest import (
    FimTemplate,
    Manifest,
    ManifestError,
    check_files,
    describe_files,
    read_manifest,
    write_manifest,
)


def _manifest(directory: Path) -> Manifest:
    (directory / "model.onnx").write_bytes(b"x" * 100)
    return Manifest(
        name="m",
        variant="fast",
        family="llama",
        architecture="LlamaForCausalLM",
        precision="int8-weight-only",
        graph="optimum",
        eos_token_ids=[0, 2],
        bos_policy="never",
        bos_token_id=None,
        context_length=8192,
        num_layers=2,
        num_kv_heads=2,
        head_dim=16,
        vocab_size=100,
        fim=FimTemplate("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        source={"origin": "test"},
        files=describe_files(directory, ["model.onnx"]),
        tools={},
    )


def test_roundtrip(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path) == manifest
    assert check_files(tmp_path, manifest) == []


def test_truncated_and_modified_files_are_found(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"x" * 50)
    assert "truncated" in check_files(tmp_path, manifest)[0]
    (tmp_path / "model.onnx").write_bytes(b"y" * 100)
    assert "sha256 mismatch" in check_files(tmp_path, manifest)[0]
    assert check_files(tmp_path, manifest, hashes=False) == []
    (tmp_path / "model.onnx").unlink()
    assert "missing" in check_files(tmp_path, manifest)[0]


@pytest.mark.parametrize("content", ["", "not json", "[]", json.dumps({"schema": 99})])
def test_bad_manifest_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(ManifestError, match="manifest"):
        read_manifest(tmp_path)


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="never built"):
        read_manifest(tmp_path)
