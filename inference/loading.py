"""Where each variant's model comes from: its folder (the one the engine's config gives, else the
built model's), loaded once for both variants when they are one graph (an FP16 fast model on a
GPU)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from inference.manifest import ManifestError, read_manifest
from inference.paths import MODEL_FILE, variant_dir
from inference.router import FAST, STANDARD

T = TypeVar("T")


def variant_dirs(
    model_name: str | None, fast_dir: Path | None, standard_dir: Path | None
) -> dict[str, Path]:
    """Each variant's folder: the one given, else the named model's."""
    if fast_dir is not None and standard_dir is not None:
        return {FAST: fast_dir, STANDARD: standard_dir}
    if model_name is None:
        raise ValueError(
            "EngineConfig names no model: pass model_name (models.choice.selected_model()) "
            "or both fast_dir and standard_dir"
        )
    return {
        FAST: fast_dir or variant_dir(model_name, FAST),
        STANDARD: standard_dir or variant_dir(model_name, STANDARD),
    }


def same_graph(a: Path, b: Path) -> bool:
    """Both variants are one graph (an FP16 fast model on a GPU): load it once."""
    try:
        files = [read_manifest(d).files for d in (a, b)]
    except ManifestError:
        return False
    entry = [f.get(MODEL_FILE) for f in files]
    return entry[0] is not None and entry[0] == entry[1]


def folder_loaders(dirs: dict[str, Path], load: Callable[[Path], T]) -> dict[str, Callable[[], T]]:
    """Each variant's loader: `load` of its folder, shared when both are one graph."""
    loaders: dict[str, Callable[[], T]] = {v: functools.partial(load, d) for v, d in dirs.items()}
    if same_graph(dirs[FAST], dirs[STANDARD]):
        loaders[FAST] = loaders[STANDARD] = _once(loaders[STANDARD])
    return loaders


def _once(load: Callable[[], T]) -> Callable[[], T]:
    """`load`, run at most once however many variants (and threads) ask for it."""
    lock, made = threading.Lock(), []

    def shared() -> T:
        with lock:
            if not made:
                made.append(load())
            return made[0]

    return shared
