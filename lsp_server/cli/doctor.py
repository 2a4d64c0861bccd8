"""`fastcomplete doctor`: what this machine will use and why, and what to do about each problem.

Each check is a plain function returning Checks; the command prints them, `--json` gives them to
Neovim's `:checkhealth fastcomplete` (editors/nvim/lua/fastcomplete/health.lua), which shows the
same checks. Nothing here loads a model or starts ONNX Runtime's CUDA provider (slow, noisy).
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from lsp_server.config.editors import read_editors

Level = Literal["ok", "info", "warn", "error"]


@dataclass(frozen=True)
class Check:
    area: str
    level: Level
    message: str
    advice: str = ""


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def versions() -> list[Check]:
    names = ("fastcomplete", "onnxruntime-gpu", "onnxruntime", "tokenizers", "pygls", "tree-sitter")
    found = {n: v for n in names if (v := _version(n))}
    line = ", ".join(f"{n} {v}" for n, v in found.items())
    checks = [Check("versions", "info", f"Python {platform.python_version()}; {line}")]
    if found.get("onnxruntime") and found.get("onnxruntime-gpu"):
        checks.append(
            Check(
                "versions",
                "error",
                "both onnxruntime and onnxruntime-gpu are installed: they provide one module",
                "uninstall one of them (pip uninstall onnxruntime)",
            )
        )
    return checks


def device() -> list[Check]:
    from inference.device import DEVICE_ENV, cpu_only, cuda_runtime_installed, gpu_present
    from models.choice import gpu_info

    if cpu_only():
        return [Check("device", "info", f"CPU: {DEVICE_ENV}=cpu")]
    if not gpu_present():
        return [Check("device", "ok", "CPU: no NVIDIA GPU on this machine")]
    gpu = gpu_info()
    name = f"{gpu.name}, {gpu.memory_bytes / 2**30:.0f} GiB" if gpu else "an NVIDIA GPU"
    if not cuda_runtime_installed():
        return [
            Check(
                "device",
                "warn",
                f"{name} found, but this ONNX Runtime is the CPU build: the model runs on the CPU",
                "install onnxruntime-gpu (pip install onnxruntime-gpu) in fastcomplete's environment",
            )
        ]
    libraries = _cuda_libraries()
    if not libraries:
        return [
            Check(
                "device",
                "warn",
                f"{name} and onnxruntime-gpu found, but no CUDA/cuDNN libraries were",
                "pip install 'onnxruntime-gpu[cuda,cudnn]' (the nvidia-* wheels), or install "
                "CUDA 12 and cuDNN 9 system-wide",
            )
        ]
    return [Check("device", "ok", f"GPU: {name}; CUDA libraries: {', '.join(libraries)}")]


def _cuda_libraries() -> list[str]:
    """The nvidia-* wheels' CUDA runtime and cuDNN, or the system's (ldconfig's cache)."""
    found = [p for p in ("nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12") if _version(p)]
    found += [p for p in ("nvidia-cuda-runtime", "nvidia-cudnn-cu13") if _version(p)]
    if found:
        return found
    cache = Path("/etc/ld.so.cache")
    data = cache.read_bytes() if cache.is_file() else b""
    return [lib for lib in ("libcudart.so", "libcudnn.so") if lib.encode() in data]


def default_model() -> list[Check]:
    from models.choice import default_choice, selected_model
    from models.registry import list_models

    name = selected_model()
    why = "FASTCOMPLETE_MODEL" if os.environ.get("FASTCOMPLETE_MODEL") else default_choice().reason
    statuses = [s for s in list_models() if s.name == name]
    checks = [Check("model", "info", f"default model {name} ({why})")]
    if not statuses:
        checks.append(
            Check(
                "model",
                "error",
                f"{name} is not built",
                f"fastcomplete models build --model {name}",
            )
        )
    for s in statuses:
        if s.problems:
            checks.append(
                Check(
                    "model",
                    "error",
                    f"{name}/{s.variant}: " + "; ".join(s.problems),
                    f"fastcomplete models build --model {name} --force",
                )
            )
        else:
            precision = s.manifest.precision if s.manifest else "?"
            checks.append(Check("model", "ok", f"{name}/{s.variant} built ({precision})"))
    return checks


def build_tools() -> list[Check]:
    from models.build_env import build_env_dir, installed_build_env, missing_build_tools

    missing = missing_build_tools()
    if not missing:
        return [Check("build", "ok", "model build tools installed")]
    if installed_build_env() is not None:
        return [Check("build", "ok", f"model build tools installed under {build_env_dir()}")]
    return [
        Check(
            "build",
            "info",
            f"building models needs {', '.join(missing)} (not installed here)",
            "fastcomplete models build --install-build-env (installs them under "
            "$FASTCOMPLETE_HOME, once)",
        )
    ]


def home() -> list[Check]:
    from inference.paths import fastcomplete_home

    root = fastcomplete_home()
    if not root.exists():
        return [Check("home", "info", f"{root}: not created yet (models build makes it)")]
    sizes: dict[str, int] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            top = path.relative_to(root).parts[0]
            sizes[top] = sizes.get(top, 0) + path.stat().st_size
    total = sum(sizes.values())
    parts = [f"{n} {b / 1e6:.0f} MB" for n, b in sorted(sizes.items()) if (root / n).is_dir()]
    detail = f" ({', '.join(parts)})" if parts else ""
    return [Check("home", "info", f"{root}: {total / 1e6:.0f} MB{detail}")]


def editors() -> list[Check]:
    seen = read_editors()
    if not seen:
        return [Check("editors", "info", "no editor has started the server yet")]
    return [
        Check("editors", "info", f"{name}, last {entry['seen']}: {json.dumps(entry['settings'])}")
        for name, entry in sorted(seen.items())
    ]


def run_checks() -> list[Check]:
    checks: list[Check] = []
    for check in (versions, device, default_model, build_tools, home, editors):
        try:
            checks += check()
        except Exception as exc:  # a broken check must not hide the others
            checks.append(Check(check.__name__, "error", f"the check failed: {exc}"))
    return checks


def print_checks(checks: list[Check]) -> None:
    marks = {"ok": "ok   ", "info": "     ", "warn": "WARN ", "error": "ERROR"}
    for check in checks:
        print(f"{marks[check.level]} {check.area:<8} {check.message}")
        if check.advice:
            print(f"{'':15}-> {check.advice}")


def doctor(as_json: bool = False) -> int:
    checks = run_checks()
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        print_checks(checks)
    return 1 if any(c.level == "error" for c in checks) else 0
