"""Whether this machine has a GPU ONNX Runtime could use, without importing onnxruntime."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

DEVICE_ENV = "FASTCOMPLETE_DEVICE"


def cpu_only() -> bool:
    """The person said FASTCOMPLETE_DEVICE=cpu: never try CUDA, whatever the machine has."""
    return os.environ.get(DEVICE_ENV, "").lower() == "cpu"


def gpu_present() -> bool:
    """A cheap pre-check before asking ORT for CUDA (whose load failure is slow and noisy)."""
    if cpu_only():
        return False
    return Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists()


def cuda_runtime_installed() -> bool:
    """onnxruntime-gpu is the installed ONNX Runtime (the CPU wheel has no CUDA provider)."""
    try:
        metadata.version("onnxruntime-gpu")
    except metadata.PackageNotFoundError:
        return False
    return True
