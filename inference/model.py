"""A built model variant loaded for inference: manifest + session + KV pool + tokenizer."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from inference.errors import ModelLoadError
from inference.graph import GraphSpec, inspect_graph
from inference.kv_cache import KVPool, PoolConfig, Rope
from inference.manifest import (
    SHARED_KV_GRAPHS,
    Manifest,
    ManifestError,
    check_files,
    read_manifest,
)
from inference.paths import MODEL_FILE
from inference.runner import Runner
from inference.session import SessionConfig, create_session, on_gpu
from inference.tokenizer import Tokenizer

TOKENIZER_FILE = "tokenizer.json"


@dataclass
class Model:
    name: str
    variant: str
    manifest: Manifest
    runner: Runner
    pool: KVPool
    tokenizer: Tokenizer

    @property
    def model_id(self) -> str:
        return f"{self.name}/{self.variant}"

    @property
    def tokenizer_id(self) -> str:
        """Equal for models whose prompts encode to the same ids (the tokenizer file's sha256)."""
        entry = self.manifest.files.get(TOKENIZER_FILE)
        return entry.sha256 if entry else self.model_id

    @property
    def spec(self) -> GraphSpec:
        return self.runner.spec

    @property
    def eos_ids(self) -> frozenset[int]:
        return frozenset(self.manifest.eos_token_ids)

    @property
    def on_gpu(self) -> bool:
        return on_gpu(self.runner.session)


def load_model_dir(
    directory: Path,
    session_config: SessionConfig = SessionConfig(),
    pool_config: PoolConfig = PoolConfig(),
    verify_hashes: bool = False,
) -> Model:
    """`verify_hashes`: check every file's sha256 (seconds for large models; the server does it
    while loading in the background)."""
    try:
        manifest = read_manifest(directory)
    except ManifestError as exc:
        raise ModelLoadError(f"{exc}: run `fastcomplete models build`") from exc
    problems = check_files(directory, manifest, hashes=verify_hashes)
    if problems:
        raise ModelLoadError(f"{problems[0]}: run `fastcomplete models build --force`")
    try:
        session = create_session(directory / MODEL_FILE, session_config)
        spec = inspect_graph(session)
    except Exception as exc:  # ORT raises its own exception types for corrupt graphs
        raise ModelLoadError(
            f"{directory / MODEL_FILE}: cannot load ({type(exc).__name__}: {exc}); "
            "run `fastcomplete models build --force`"
        ) from exc
    capacity = min(pool_config.capacity_tokens, manifest.context_length)
    theta = manifest.rope_theta if manifest.rope_theta is not None else _built_theta(directory)
    device = "cuda" if on_gpu(session) else "cpu"
    pool = KVPool(
        spec,
        shared_buffers=manifest.graph in SHARED_KV_GRAPHS,
        config=replace(pool_config, capacity_tokens=capacity, device=device),
    )
    if pool_config.shift_tail and theta is not None:
        pool.rope = Rope(theta, spec.head_dim)
    tokenizer = Tokenizer(directory / TOKENIZER_FILE, manifest.bos_token_id)
    runner = Runner(session, spec)
    slot, _ = pool.lease([0])
    try:
        runner.calibrate(slot)
    finally:
        pool.release(slot)
    return Model(manifest.name, manifest.variant, manifest, runner, pool, tokenizer)


def _built_theta(directory: Path) -> float | None:
    """The rotary base from the build's own HF config beside the variant (models built before
    the manifest recorded it); None when it is not there or positions are scaled."""
    try:
        cfg = json.loads((directory.parent / "hf" / "config.json").read_text())
    except (OSError, ValueError):
        return None
    theta = cfg.get("rope_theta")
    return None if cfg.get("rope_scaling") or not isinstance(theta, int | float) else float(theta)
