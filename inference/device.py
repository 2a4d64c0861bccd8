"""Whether this machine has a GPU ONNX Runtime could use, without importing onnxruntime."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path


def gpu_present() -> bool:
    """A cheap pre-check before asking ORT for CUDA (whose load failure is slow and noisy)."""
    if os.environ.get("FASTCOMPLETE_DEVICE", "").lower() == "cpu":
        return False
    return Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists()


def cuda_runtime_installed() -> bool:
    """onnxruntime-gpu is the installed ONNX Runtime (the CPU wheel has no CUDA provider)."""
    try:
        metadata.version("onnxruntime-gpu")
    except metadata.PackageNotFoundError:
        return False
    return True
