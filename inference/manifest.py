"""The manifest that travels with each built model variant: what it is and how to check it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
SCHEMA_VERSION = 1
# Graphs whose GroupQueryAttention can use one preallocated KV buffer as both past and present:
# onnxruntime-genai's builder (models/genai_build.py), and our own fused graph before 2026-12-04.
GENAI_GRAPH = "ort-genai-builder"
GENAI_CUDA_GRAPH = "ort-genai-builder-cuda"  # the builder's CUDA graph: FP16 standard model
SHARED_KV_GRAPHS = frozenset({GENAI_GRAPH, GENAI_CUDA_GRAPH, "fused-gqa"})


class ManifestError(Exception):
    """A manifest is missing, unreadable, or does not match the files beside it."""


@dataclass
class FimTemplate:
    prefix: str
    suffix: str
    middle: str
    order: str = "psm"  # prefix-suffix-middle, the order StarCoder and Qwen-Coder were trained on
    pad: str | None = None  # `<|fim_pad|>`: never text
    # Qwen2.5-Coder's repository-level format: `<|repo_name|>name` then `<|file_sep|>path` files.
    repo_name: str | None = None
    file_sep: str | None = None

    def tokens(self) -> tuple[str, ...]:
        """Every special token of the template (none of them is ever text for the editor)."""
        extras = (self.pad, self.repo_name, self.file_sep)
        return (self.prefix, self.suffix, self.middle, *(t for t in extras if t))


@dataclass
class FileEntry:
    sha256: str
    bytes: int


@dataclass
class Manifest:
    name: str
    variant: str  # "standard" or "fast"
    family: str  # config.model_type, e.g. "llama"
    architecture: str
    precision: str  # "fp32", "fp16" (CUDA builds) or "int8-weight-only"
    graph: str  # GENAI_GRAPH or GENAI_CUDA_GRAPH; "fused-gqa" or "optimum" from older builds
    eos_token_ids: list[int]
    bos_policy: str  # "never" or "always": whether a BOS token is prepended to every prompt
    bos_token_id: int | None
    context_length: int
    num_layers: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    fim: FimTemplate | None
    source: dict[str, Any]
    files: dict[str, FileEntry]
    tools: dict[str, str]
    quantization: dict[str, Any] | None = None
    validation: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0
    created: str = ""
    # The model's own chat template (Jinja, from its tokenizer config or GGUF metadata); None for
    # models built before it was recorded, or that have none: explain/refactor then use ChatML.
    chat_template: str | None = None
    # Rotary position base, when positions are plain RoPE (no scaling): the KV cache can move a
    # cached span to other positions (inference/kv_cache.py, the FIM tail). None: it cannot.
    rope_theta: float | None = None
    # Why the fast model has its weights: {"device", "bits", "basis"} and, when measured on the
    # machine (bench/fast_choice.py), each candidate's decode speed and agreement.
    fast_choice: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        data = dict(data)
        if data.get("schema") != SCHEMA_VERSION:
            raise ManifestError(f"unsupported manifest schema {data.get('schema')!r}")
        fim = data.pop("fim", None)
        files = data.pop("files", {})
        try:
            return cls(
                fim=FimTemplate(**fim) if fim else None,
                files={k: FileEntry(**v) for k, v in files.items()},
                **data,
            )
        except TypeError as exc:
            raise ManifestError(f"malformed manifest: {exc}") from exc


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def describe_files(directory: Path, names: list[str]) -> dict[str, FileEntry]:
    return {
        n: FileEntry(sha256=sha256_file(directory / n), bytes=(directory / n).stat().st_size)
        for n in names
    }


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    path = directory / MANIFEST_NAME
    path.write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ManifestError(f"{path}: no manifest (the model was never built here)") from exc
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: unreadable manifest ({exc})") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: manifest is not a JSON object")
    return Manifest.from_json(data)


def check_files(directory: Path, manifest: Manifest, *, hashes: bool = True) -> list[str]:
    """Problems with the files a manifest lists, as one line each; empty when all match."""
    problems = []
    for name, entry in manifest.files.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.stat().st_size != entry.bytes:
            problems.append(f"{path}: size {path.stat().st_size} != {entry.bytes} (truncated?)")
        elif hashes and sha256_file(path) != entry.sha256:
            problems.append(f"{path}: sha256 mismatch (corrupt or modified)")
    return problems
