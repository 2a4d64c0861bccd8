"""`fastcomplete models build`: source -> HF FP32 -> standard ONNX -> fast ONNX -> validate -> swap in.

Everything is built in a temporary folder beside the target and renamed into place at the end, so
an interrupted or failed build leaves nothing half-made and never touches the previous model.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from inference.manifest import (
    GENAI_CUDA_GRAPH,
    GENAI_GRAPH,
    Manifest,
    ManifestError,
    check_files,
    describe_files,
    read_manifest,
    write_manifest,
)
from inference.paths import VARIANTS, ensure_private_dir, model_dir, models_dir
from models.catalogue import catalogue_source
from models.choice import selected_model
from models.convert import (
    PINNED_INPUTS,
    PINNED_TOKENIZER_CLASS,
    Converted,
    check_family,
    convert,
)
from models.fast_choice import FAST_BITS, FAST_BITS_BASIS
from models.genai_build import (
    NBitsScheme,
    build_graph,
    builder_python,
    builder_versions,
)
from models.source import Source, SourceError, check_gguf, check_hf_dir
from models.tiny import TINY_NAME, make_tiny
from models.tokenizer_check import tokenizer_problems
from models.validate import validate

TOKENIZER_FILE = "tokenizer.json"
TINY_TOKENIZER_FROM = "smollm2-135m"  # the tiny random model borrows this entry's real tokenizer
# Both models are onnxruntime-genai's graph (models/genai_build.py): the standard model in FP32,
# validated against torch; the fast model with 8-bit weights, validated against the standard one.
TOOLS = (
    "onnxruntime-gpu",
    "onnxruntime",
    "onnx",
    "torch",
    "transformers",
    "gguf",
)


class BuildError(Exception):
    """A build failed; the message says what to do. Nothing was left behind."""


@dataclass
class BuildRequest:
    name: str | None = None
    # A catalogue entry (models/catalogue.py); default: FASTCOMPLETE_MODEL, else this machine's
    # default (models/choice.py).
    model: str | None = None
    from_gguf: Path | None = None
    from_hf: Path | None = None
    tiny: bool = False
    force: bool = False
    # MatMulNBits block size of the fast model. 32 keeps the most quality; 128 prefills ~25% faster
    # with a larger NLL gap (docs/engine.md, "Fast model block size"); the agreement gate applies to both.
    block_size: int = NBitsScheme.block_size
    # The fast model's weights: 8 or 4 bits, or 16 (FP16, CUDA builds only: the standard graph,
    # loaded once); None: this device's default (FAST_BITS).
    bits: int | None = None
    cuda: bool = False  # the builder's CUDA graphs (FP16 standard model), for a GPU machine
    # What chose the bits: a measured pick (models/fast_choice.py: manifest_record), or this
    # device's default.
    fast_choice: dict | None = None

    @property
    def fast_bits(self) -> int:
        return self.bits if self.bits is not None else FAST_BITS["cuda" if self.cuda else "cpu"]

    @property
    def scheme(self) -> NBitsScheme | None:
        """The fast model's weight-only quantization; None for an FP16 fast model."""
        if self.fast_bits == 16:
            return None
        return NBitsScheme(bits=self.fast_bits, block_size=self.block_size)

    def precision(self, fast: bool) -> str:
        if fast and self.scheme is not None:
            return f"int{self.fast_bits}-weight-only"
        return "fp16" if self.cuda else "fp32"

    def quantization(self, fast: bool) -> dict | None:
        return self.scheme.describe() if fast and self.scheme is not None else None

    def choice(self) -> dict:
        """The manifest's record of why the fast model has its weights."""
        device = "cuda" if self.cuda else "cpu"
        if self.fast_choice is not None:
            return {"device": device, "bits": self.fast_bits, **self.fast_choice}
        basis = "asked (--bits)" if self.bits is not None else FAST_BITS_BASIS[device]
        return {"device": device, "bits": self.fast_bits, "basis": basis}

    @property
    def graph(self) -> str:
        return GENAI_CUDA_GRAPH if self.cuda else GENAI_GRAPH


@dataclass
class BuildResult:
    name: str
    path: Path
    built: bool  # False when a valid build was already there
    seconds: float
    manifests: dict[str, Manifest]


class Steps:
    """One progress bar per build step, on stderr."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total, self.index, self.quiet = total, 0, quiet

    @contextlib.contextmanager
    def step(self, desc: str) -> Iterator[None]:
        from tqdm import tqdm

        self.index += 1
        label = f"[{self.index}/{self.total}] {desc}"
        with tqdm(
            total=1,
            desc=label,
            disable=self.quiet,
            leave=True,
            bar_format="{desc:<44} {bar:20} {elapsed}",
        ) as bar:
            yield
            bar.update(1)


def default_name(request: BuildRequest) -> str:
    if request.name:
        return request.name
    if request.tiny:
        return TINY_NAME
    picked = request.from_gguf or request.from_hf
    if picked is None:
        return request.model or selected_model()
    return re.sub(r"[^a-z0-9._-]+", "-", picked.resolve().name.removesuffix(".gguf").lower())


def resolve_source(request: BuildRequest) -> Source:
    if sum(map(bool, (request.from_gguf, request.from_hf, request.model))) > 1:
        raise SourceError("pass one of --model, --from-gguf or --from-hf")
    if request.from_gguf:
        return Source("gguf", check_gguf(request.from_gguf), f"gguf:{request.from_gguf.name}")
    if request.from_hf:
        return Source("hf", check_hf_dir(request.from_hf), f"hf:{request.from_hf.name}")
    return catalogue_source(request.model or selected_model())


def existing_build(name: str, request: BuildRequest) -> dict[str, Manifest] | None:
    """The manifests of a complete, uncorrupted build of `name` as `request` asks, or None."""
    try:
        manifests = {v: read_manifest(model_dir(name) / v) for v in VARIANTS}
    except ManifestError:
        return None
    ok = all(not check_files(model_dir(name) / v, m) for v, m in manifests.items())
    scheme = request.scheme
    same_scheme = manifests["fast"].quantization == (scheme.describe() if scheme else None)
    # A build of another graph (our own fused graph before 2026-12-04), or whose hf/ tokenizer
    # reads differently in transformers 5 (vLLM), is rebuilt.
    same_graph = all(m.graph == request.graph for m in manifests.values())
    if not (ok and same_scheme and same_graph and _pinned(model_dir(name))):
        return None
    # A build whose tokenizer split special tokens into text (before 2026-12-02) is rebuilt.
    fast = manifests["fast"]
    kept = not tokenizer_problems(
        model_dir(name) / "fast" / TOKENIZER_FILE,
        eos_token_ids=fast.eos_token_ids,
        fim=fast.fim,
        chat_template=fast.chat_template,
        vocab_size=fast.vocab_size,
    )
    return manifests if kept else None


def _pinned(target: Path) -> bool:
    try:
        config = json.loads((target / "hf" / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return False
    pinned = (PINNED_TOKENIZER_CLASS, PINNED_INPUTS)
    return (config.get("tokenizer_class"), config.get("model_input_names")) == pinned


def _tool_versions(builder: dict[str, str]) -> dict[str, str]:
    versions = dict(builder)
    for tool in TOOLS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[tool] = metadata.version(tool)
    return versions


def _manifest(
    name: str,
    variant: str,
    converted: Converted,
    source: Source,
    directory: Path,
    figures: dict,
    seconds: float,
    request: BuildRequest,
    builder: dict[str, str],
) -> Manifest:
    cfg, facts = converted.config, converted.facts
    heads = cfg["num_attention_heads"]
    fast = variant == "fast"
    return Manifest(
        name=name,
        variant=variant,
        family=cfg["model_type"],
        architecture=(cfg.get("architectures") or ["?"])[0],
        precision=request.precision(fast),
        graph=request.graph,
        eos_token_ids=facts.eos_token_ids,
        bos_policy=facts.bos_policy,
        bos_token_id=facts.bos_token_id,
        context_length=int(cfg.get("max_position_embeddings", 2048)),
        num_layers=int(cfg["num_hidden_layers"]),
        num_kv_heads=int(cfg.get("num_key_value_heads", heads)),
        head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
        vocab_size=int(cfg["vocab_size"]),
        fim=facts.fim,
        chat_template=facts.chat_template,
        rope_theta=rope_theta(cfg),
        source={"origin": source.origin, "file": source.path.name},
        files=describe_files(directory, sorted(p.name for p in directory.iterdir())),
        tools=_tool_versions(builder),
        quantization=request.quantization(fast),
        fast_choice=request.choice(),
        validation=figures,
        build_seconds=round(seconds, 1),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def rewrite_manifest(template: Manifest, folder: Path, request: BuildRequest) -> Manifest:
    """`template`, this variant's manifest from a build made elsewhere, rewritten for the graphs
    built into `folder` as `request` asks (graph, precision, quantization, the fast model's
    choice and files) and written there: bench/gpu_real.py builds a model's CUDA graphs on a lent
    GPU, which has no sources to convert, from the manifests of the build here."""
    fast = template.variant == "fast"
    manifest = replace(
        template,
        graph=request.graph,
        precision=request.precision(fast),
        quantization=request.quantization(fast),
        fast_choice=request.choice(),
        files=describe_files(folder, sorted(p.name for p in folder.iterdir())),
    )
    write_manifest(folder, manifest)
    return manifest


def rope_theta(cfg: dict) -> float | None:
    """The rotary base of a plain-RoPE model (None when positions are scaled or not rotary)."""
    theta = cfg.get("rope_theta")
    if cfg.get("rope_scaling") or not isinstance(theta, int | float):
        return None
    return float(theta)


def _encoder(hf_dir: Path, converted: Converted):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(hf_dir / TOKENIZER_FILE))
    bos = converted.facts.bos_token_id if converted.facts.bos_policy == "always" else None

    def encode(text: str) -> list[int]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        return [bos, *ids] if bos is not None else ids

    return encode


def _build_into(
    work: Path, name: str, request: BuildRequest, source: Source, steps: Steps
) -> dict[str, Manifest]:
    started = time.monotonic()
    python = builder_python()
    builder = builder_versions(python)
    hf_dir = work / "hf"
    with steps.step("tiny random Llama" if request.tiny else "convert to transformers FP32"):
        converted = make_tiny(source, hf_dir) if request.tiny else convert(source, hf_dir)
        check_family(converted.config["model_type"], hf_dir)
        _check_tokenizer(hf_dir / TOKENIZER_FILE, converted, source)
    where = "CUDA" if request.cuda else "CPU"
    with steps.step(f"build standard model ({where}, {'FP16' if request.cuda else 'FP32'})"):
        standard = build_graph(hf_dir, work / "standard", None, python, request.cuda)
    with steps.step(f"build fast model ({where}, {request.fast_bits}-bit)"):
        fast = fast_graph(hf_dir, work, request, python, standard)
    with steps.step("validate (greedy vs torch, agreement)"):
        encode = _encoder(hf_dir, converted)
        figures = validate(hf_dir, standard, fast, encode, request.fast_bits, request.cuda)
    with steps.step("write manifests"):
        manifests = {}
        for variant in VARIANTS:
            directory = work / variant
            shutil.copy2(hf_dir / TOKENIZER_FILE, directory / TOKENIZER_FILE)
            manifest = _manifest(
                name,
                variant,
                converted,
                source,
                directory,
                figures,
                time.monotonic() - started,
                request,
                builder,
            )
            write_manifest(directory, manifest)
            manifests[variant] = manifest
    return manifests


def fast_graph(
    hf_dir: Path, work: Path, request: BuildRequest, python: Path, standard: Path
) -> Path:
    """The fast variant's graph: quantized by the builder, or (FP16) the standard graph's files,
    hard-linked where the filesystem allows (the engine then loads it once: inference/engine.py)."""
    if request.scheme is not None:
        return build_graph(hf_dir, work / "fast", request.scheme, python, request.cuda)
    if not request.cuda:
        raise BuildError("an FP16 fast model (--bits 16) is for CUDA builds: add --cuda")
    target = work / "fast"
    target.mkdir(parents=True, exist_ok=True)
    for item in standard.parent.iterdir():
        try:
            os.link(item, target / item.name)
        except OSError:
            shutil.copy2(item, target / item.name)
    return target / standard.name


def _check_tokenizer(path: Path, converted: Converted, source: Source) -> None:
    facts = converted.facts
    problems = tokenizer_problems(
        path,
        eos_token_ids=facts.eos_token_ids,
        fim=facts.fim,
        chat_template=facts.chat_template,
        vocab_size=int(converted.config["vocab_size"]),
    )
    if problems:
        raise SourceError(
            f"{source.path}: its tokenizer does not keep the model's special tokens "
            f"({'; '.join(problems)}); nothing was built"
        )


def _swap_in(work: Path, target: Path) -> None:
    """Replace `target` with `work` so that a failure at any point leaves one complete model."""
    old = target.with_name(f".old-{target.name}-{os.getpid()}")
    if target.exists():
        target.rename(old)
    try:
        work.rename(target)
    except OSError:
        if old.exists():
            old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """transformers/torch print pages of warnings that bury the progress bars."""
    loggers = [logging.getLogger(n) for n in ("transformers", "onnxruntime", "root")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def build(request: BuildRequest, quiet: bool = False) -> BuildResult:
    name = default_name(request)
    target = model_dir(name)
    started = time.monotonic()
    if not request.force and (manifests := existing_build(name, request)):
        return BuildResult(name, target, False, 0.0, manifests)
    # The tiny model takes only its tokenizer from the default source.
    source = catalogue_source(TINY_TOKENIZER_FROM) if request.tiny else resolve_source(request)
    ensure_private_dir(models_dir())
    work = models_dir() / f".build-{name}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        with _quiet_libraries():
            manifests = _build_into(work, name, request, source, Steps(5, quiet))
        _swap_in(work, target)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise BuildError(
                f"disk full while building into {models_dir()}: free space and rerun"
            ) from exc
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return BuildResult(name, target, True, time.monotonic() - started, manifests)
