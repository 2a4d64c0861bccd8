"""The one place ONNX Runtime sessions are created: provider choice, threads, spinning, optimisation."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

from inference.device import gpu_present

log = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class SessionConfig:
    threads: int | None = None  # None: one per core this process may run on
    allow_spinning: bool = False  # spinning threads fight the editor for shared cores (measured 2x)
    prefer_gpu: bool = True
    # Capture one-token decode steps in a CUDA graph (inference/runner.py): a decode step of a
    # small model is hundreds of kernel launches, not arithmetic. Only on CUDA.
    cuda_graph: bool = True


def default_threads() -> int:
    env = os.environ.get("FASTCOMPLETE_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def session_options(config: SessionConfig) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = config.threads or default_threads()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    spin = "1" if config.allow_spinning else "0"
    opts.add_session_config_entry("session.intra_op.allow_spinning", spin)
    opts.add_session_config_entry("session.inter_op.allow_spinning", spin)
    opts.log_severity_level = 3
    return opts


def create_session(
    model_path: Path, config: SessionConfig = SessionConfig()
) -> ort.InferenceSession:
    """A session on CUDA when the CUDA provider really loads, on the CPU otherwise.

    onnxruntime-gpu lists CUDA as available even without a GPU; ORT then silently falls back, so
    the providers the session actually got are what counts.
    """
    if not model_path.is_file():
        raise FileNotFoundError(f"model file not found: {model_path}")
    opts = session_options(config)
    try_cuda = config.prefer_gpu and CUDA in ort.get_available_providers() and gpu_present()
    wanted = [CUDA, CPU] if try_cuda else [CPU]
    if try_cuda and hasattr(ort, "preload_dlls"):
        # CUDA/cuDNN from the nvidia-* wheels, when installed, are found this way.
        with contextlib.suppress(Exception):
            ort.preload_dlls()
    ort.set_default_logger_severity(4)  # a failed CUDA load is reported below, once, by us
    session = None
    if try_cuda and config.cuda_graph:
        try:
            graphs = [(CUDA, {"enable_cuda_graph": "1"}), CPU]
            session = ort.InferenceSession(str(model_path), sess_options=opts, providers=graphs)
        except Exception as exc:  # ORT refuses capture for graphs with nodes it cannot capture
            log.info("CUDA graphs off for %s (%s): decoding without", model_path.name, exc)
            opts = session_options(config)
    if session is None:
        session = ort.InferenceSession(str(model_path), sess_options=opts, providers=wanted)
    if CUDA in wanted and CUDA not in session.get_providers():
        log.info("CUDA execution provider did not load; running %s on the CPU", model_path.name)
    return session


def on_gpu(session: ort.InferenceSession) -> bool:
    return CUDA in session.get_providers()


def cuda_graph_enabled(session: ort.InferenceSession) -> bool:
    """The session may capture CUDA graphs: every run of it must then say which graph it is
    (`gpu_graph_id`; -1 for a run of shapes that change, which is not captured)."""
    options = session.get_provider_options().get(CUDA, {})
    return options.get("enable_cuda_graph") == "1"
