"""Where models and caches live: everything under $FASTCOMPLETE_HOME (default ~/.cache/fastcomplete)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "smollm2-135m"
VARIANTS = ("standard", "fast")


def selected_model() -> str:
    """The built model the server, the demo and the benchmarks use: FASTCOMPLETE_MODEL, else
    the default."""
    return os.environ.get("FASTCOMPLETE_MODEL") or DEFAULT_MODEL


def fastcomplete_home() -> Path:
    env = os.environ.get("FASTCOMPLETE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fastcomplete"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` readable by the user only: caches hold pickles and prompts hold user code."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def models_dir() -> Path:
    return fastcomplete_home() / "models"


def model_dir(name: str) -> Path:
    return models_dir() / name


def variant_dir(name: str, variant: str) -> Path:
    return model_dir(name) / variant
