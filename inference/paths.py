"""Where models and caches live: everything under $FASTCOMPLETE_HOME (default ~/.cache/fastcomplete).

A leaf (it reads only the tunables): which model to serve is chosen above the engine
(models/choice.py) and passed down.
"""

from __future__ import annotations

import os
from pathlib import Path

VARIANTS = ("standard", "fast")
MODEL_FILE = "model.onnx"  # each variant's graph, in its folder


def fastcomplete_home() -> Path:
    env = os.environ.get("FASTCOMPLETE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fastcomplete"


def kv_store_bytes() -> int:
    """The KV store's size on disk (inference/kv_store.py): FASTCOMPLETE_KV_STORE_MB, else
    KV_STORE_BYTES; 0 turns it off."""
    from inference.tuning import KV_STORE_BYTES

    env = os.environ.get("FASTCOMPLETE_KV_STORE_MB", "")
    return int(env) << 20 if env.isdigit() else KV_STORE_BYTES


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
