"""Which model a machine serves by default.

On a CPU: the catalogue's CPU default (DEFAULT_MODEL), chosen by keystrokes saved. With a GPU
the choice is made here, at run time: the best model whose weights fit the GPU's memory and
whose first suggestion, measured on this GPU (`fastcomplete models measure`), has a p95 within
T_FIRST_SUGGESTION_P95_MS. "Best" orders code models (fill-in-the-middle) above others, then
larger above smaller: the order the held-out eval's exact match gave every pair measured
(SmolLM2 23.3% < Qwen2.5-Coder 0.5B 41.7% < 1.5B 51.7%; a test holds the order to the catalogue's
figures). A model not yet measured on this GPU is chosen only up to the largest size whose speed
was measured on a GPU (UNMEASURED_MAX_PARAMS_M), so a laptop's 8 GB gets a model that fits and a
new card does not start on a 7B it has never timed.

The engine (inference/) is told which model to load and never asks for a default: its callers (the
server's engine factory, the command line, the benchmarks) ask here.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from inference import device
from inference.manifest import ManifestError, read_manifest
from inference.paths import ensure_private_dir, fastcomplete_home, models_dir
from inference.tuning import (
    GPU_MEMORY_OVERHEAD_BYTES,
    GPU_MEMORY_SHARE,
    T_FIRST_SUGGESTION_P95_MS,
    UNMEASURED_MAX_PARAMS_M,
)
from models.catalogue import CATALOGUE
from models.fast_choice import FAST_BITS

# The default catalogue model, chosen by measurement (docs/choosing-the-default.md): on a CPU
# the one that saves the most keystrokes; with a GPU, the best by exact match.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
GPU_DEFAULT_MODEL = "qwen2.5-coder-1.5b"

log = logging.getLogger(__name__)
MEASURED_FILE = "first_suggestion.json"  # under $FASTCOMPLETE_HOME/measured


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int


@dataclass(frozen=True)
class Candidate:
    name: str
    fim: bool
    params_m: int
    memory_bytes: int  # what serving it takes on the GPU: weights, KV budget, runtime


@dataclass(frozen=True)
class Choice:
    model: str
    reason: str


@functools.cache
def gpu_info() -> Gpu | None:
    """The first NVIDIA GPU's name and memory, from nvidia-smi (None when it cannot say); asked
    once per process: every command line's defaults ask for the default model."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        name, mib = out.strip().splitlines()[0].rsplit(",", 1)
        return Gpu(name.strip(), int(float(mib)) << 20)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def serving_bytes(params_m: int, fast_bits: int, kv_bytes: int) -> int:
    """GPU memory to serve a model: FP16 standard weights, the fast model's own weights unless
    they are the same FP16 graph, the KV budget and the runtime's workspace."""
    weights = params_m * 1_000_000 * 2
    fast = 0 if fast_bits >= 16 else params_m * 1_000_000 * fast_bits // 8
    return weights + fast + kv_bytes + GPU_MEMORY_OVERHEAD_BYTES


def rank(candidate: Candidate) -> tuple[bool, int]:
    return (candidate.fim, candidate.params_m)


def choose_gpu_model(
    candidates: list[Candidate], gpu: Gpu, p95_ms: dict[str, float], fallback: str
) -> Choice:
    """The best candidate that fits `gpu` and is fast enough there (see the module's doc)."""
    room = int(gpu.memory_bytes * GPU_MEMORY_SHARE)
    fits = [c for c in candidates if c.memory_bytes <= room]
    fast = [c for c in fits if p95_ms.get(c.name, float("inf")) <= T_FIRST_SUGGESTION_P95_MS]
    if fast:
        best = max(fast, key=rank)
        return Choice(
            best.name,
            f"the best that fits {gpu.name} and answers its first suggestion in "
            f"{p95_ms[best.name]:.0f} ms p95 there (budget {T_FIRST_SUGGESTION_P95_MS:.0f})",
        )
    untimed = [c for c in fits if c.name not in p95_ms and c.params_m <= UNMEASURED_MAX_PARAMS_M]
    if untimed:
        best = max(untimed, key=rank)
        return Choice(
            best.name,
            f"the best that fits {gpu.name} of the sizes measured fast enough on a GPU; not "
            "timed on this GPU yet (`fastcomplete models measure`)",
        )
    return Choice(fallback, f"nothing measured fits {gpu.name}'s memory and latency budget")


def measured_path() -> Path:
    return fastcomplete_home() / "measured" / MEASURED_FILE


def measured_p95(gpu: Gpu) -> dict[str, float]:
    """First-suggestion p95 ms per model, as `models measure` recorded them on this GPU."""
    try:
        data = json.loads(measured_path().read_text())
        return {str(k): float(v) for k, v in data.get(gpu.name, {}).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def record_p95(gpu: Gpu, model: str, p95_ms: float) -> None:
    path = measured_path()
    ensure_private_dir(path.parent)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.setdefault(gpu.name, {})[model] = round(p95_ms, 1)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def candidates(kv_bytes: int) -> list[Candidate]:
    """The catalogue's models, and models built from a file the person named (their size read
    from the build), each with the memory it needs on a GPU."""
    found = {
        e.name: Candidate(
            e.name, e.fim, e.params_m, serving_bytes(e.params_m, FAST_BITS["cuda"], kv_bytes)
        )
        for e in CATALOGUE.values()
    }
    root = models_dir()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name in found:
            continue
        try:
            standard, fast = (read_manifest(folder / v) for v in ("standard", "fast"))
        except ManifestError:
            continue
        if standard.precision != "fp16":
            continue  # a CPU build: the GPU would run its FP32 graph
        params_m = sum(f.bytes for f in standard.files.values()) // 2_000_000
        bits = int((fast.quantization or {}).get("bits", 16))
        need = serving_bytes(params_m, bits, kv_bytes)
        found[folder.name] = Candidate(folder.name, fast.fim is not None, params_m, need)
    return list(found.values())


def default_choice() -> Choice:
    """This machine's default model and why: the CPU default without a GPU ONNX Runtime can use
    (onnxruntime-gpu and an NVIDIA device); else the choice for this GPU (GPU_DEFAULT_MODEL where
    nvidia-smi cannot describe it, DEFAULT_MODEL where nothing fits it)."""
    if not (device.gpu_present() and device.cuda_runtime_installed()):
        return Choice(DEFAULT_MODEL, "the CPU default: it saved the most keystrokes on a CPU")
    gpu = gpu_info()
    if gpu is None:
        return Choice(GPU_DEFAULT_MODEL, "nvidia-smi did not describe the GPU: the fixed default")
    # kv_cache imports onnxruntime: only a machine with a GPU pays for it here.
    from inference.kv_cache import PoolConfig

    kv_bytes = PoolConfig().budget_bytes
    choice = choose_gpu_model(candidates(kv_bytes), gpu, measured_p95(gpu), DEFAULT_MODEL)
    log.info("default model %s: %s", choice.model, choice.reason)
    return choice


def default_model() -> str:
    """This machine's default model (default_choice says how it is chosen)."""
    return default_choice().model


def selected_model() -> str:
    """The built model the server, the demo and the benchmarks use: FASTCOMPLETE_MODEL, else
    the default for this machine."""
    return os.environ.get("FASTCOMPLETE_MODEL") or default_model()
