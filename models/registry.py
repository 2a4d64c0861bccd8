"""`models list` and `models verify`: what is built under $FASTCOMPLETE_HOME, and is it intact."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inference.manifest import Manifest, ManifestError, check_files, read_manifest
from inference.paths import VARIANTS, model_dir, models_dir

VERIFY_PROMPT_IDS = np.array([1604, 3987, 24, 94, 727], dtype=np.int64)  # "def fib(n):"


@dataclass
class VariantStatus:
    name: str
    variant: str
    path: Path
    manifest: Manifest | None
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": self.name,
            "variant": self.variant,
            "path": str(self.path),
            "ok": not self.problems,
            "problems": self.problems,
            "precision": m.precision if m else None,
            "graph": m.graph if m else None,
            "size_bytes": sum(f.bytes for f in m.files.values()) if m else None,
            "validation": m.validation if m else None,
            "quantization": m.quantization if m else None,
            "source": m.source if m else None,
            "created": m.created if m else None,
        }


def _status(name: str, variant: str) -> VariantStatus:
    path = model_dir(name) / variant
    try:
        manifest = read_manifest(path)
    except ManifestError as exc:
        return VariantStatus(name, variant, path, None, [str(exc)])
    return VariantStatus(name, variant, path, manifest, check_files(path, manifest, hashes=False))


def list_models() -> list[VariantStatus]:
    """Every built variant, with cheap checks only (sizes, not hashes)."""
    root = models_dir()
    if not root.is_dir():
        return []
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [_status(n, v) for n in names for v in VARIANTS if (root / n / v).exists()]


def _forward_problem(path: Path, manifest: Manifest) -> str | None:
    from inference.graph import forward, inspect_graph
    from inference.session import SessionConfig, create_session

    try:
        session = create_session(path / "model.onnx", SessionConfig(prefer_gpu=False))
        spec = inspect_graph(session)
        ids = VERIFY_PROMPT_IDS % manifest.vocab_size
        logits, _ = forward(session, spec, ids, 0, spec.empty_past())
    except Exception as exc:  # any load/run failure is a verification finding, not a crash
        return f"{path / 'model.onnx'}: forward pass failed ({type(exc).__name__}: {exc})"
    if logits.shape[-1] != manifest.vocab_size or not np.isfinite(logits).all():
        return f"{path / 'model.onnx'}: forward pass gave bad logits {logits.shape}"
    return None


def verify(name: str) -> list[VariantStatus]:
    """sha256 of every file, then one forward pass per variant."""
    statuses = []
    for variant in VARIANTS:
        status = _status(name, variant)
        if status.manifest is not None and not status.problems:
            status.problems = check_files(status.path, status.manifest, hashes=True)
        if status.manifest is not None and not status.problems:
            problem = _forward_problem(status.path, status.manifest)
            status.problems += [problem] if problem else []
        statuses.append(status)
    return statuses
