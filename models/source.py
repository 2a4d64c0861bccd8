"""Where model weights come from: a catalogue entry (models/catalogue.py) or a file/dir the user
names. Nothing is fetched from a model hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"


class SourceError(Exception):
    """The weights to build from are missing, corrupt, or of an unsupported kind."""


@dataclass(frozen=True)
class Source:
    kind: str  # "gguf" or "hf"
    path: Path  # the .gguf file, or the HF model directory
    origin: str  # human-readable provenance for the manifest


def check_gguf(path: Path) -> Path:
    if not path.is_file():
        raise SourceError(f"GGUF file not found: {path}")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise SourceError(f"{path} is not a GGUF file (bad magic {magic!r}): re-download it")
    return path


def check_hf_dir(path: Path) -> Path:
    if not path.is_dir():
        raise SourceError(f"model directory not found: {path}")
    for name in ("config.json", "tokenizer.json"):
        if not (path / name).is_file():
            raise SourceError(f"{path} has no {name}: pass a Hugging Face model directory")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise SourceError(f"{path} has no weights (*.safetensors or *.bin)")
    return path
