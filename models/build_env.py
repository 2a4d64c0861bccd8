"""The tools that build models, for a server installed without them (`uv tool install`, `pipx`).

Serving needs ONNX Runtime and a tokenizer; building a model needs torch and transformers 4 (the
GGUF conversion, models/convert.py) and, in an environment of its own, onnxruntime-genai's graph
builder with transformers 5 (models/genai_build.py). An installed server has neither. With the
person's consent (`fastcomplete models build --install-build-env`) both are made once under
$FASTCOMPLETE_HOME, and `models build` runs itself inside the first:

    build-env/    torch, transformers 4, gguf, onnx + the server's own dependencies; this
                  installation's packages reached through a .pth file (the same code, not a copy)
    builder-env/  torch and the builder's pins (BUILDER_PINS)
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from inference.paths import fastcomplete_home

BUILD_MODULES = ("torch", "transformers", "gguf", "onnx", "tqdm")
TORCH = "torch==2.13.0"  # the CPU wheel (make install pins the same); a GPU build is not needed
TORCH_INDEX_ENV = "FASTCOMPLETE_TORCH_INDEX"  # e.g. https://download.pytorch.org/whl/cpu
PACKAGES = ("lsp_server", "inference", "models")

Progress = Callable[[str], None]


def build_env_dir() -> Path:
    return fastcomplete_home() / "build-env"


def builder_env_dir() -> Path:
    return fastcomplete_home() / "builder-env"


def env_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def missing_build_tools() -> list[str]:
    """The build's modules this Python lacks, and the builder's environment if none is found."""
    missing = [m for m in BUILD_MODULES if importlib.util.find_spec(m) is None]
    from models.genai_build import GraphBuildError, builder_python

    try:
        builder_python()
    except GraphBuildError:
        missing.append("onnxruntime-genai's builder (its own environment)")
    return missing


def installed_build_env() -> Path | None:
    """The build environment's Python, when `--install-build-env` made one."""
    python = env_python(build_env_dir())
    done = build_env_dir() / ".complete"
    return python if python.is_file() and done.is_file() else None


def _requirements(extra: str) -> list[str]:
    """This installation's requirements and those of `extra`, for pip (which evaluates the
    platform markers left on them)."""
    wanted = []
    for line in metadata.requires("fastcomplete") or []:
        spec, _, marker = (part.strip() for part in line.partition(";"))
        if "extra ==" in marker:
            if marker.replace("'", '"') != f'extra == "{extra}"':
                continue
            marker = ""
        if spec.split("<")[0].split(">")[0].split("=")[0].strip() == "torch":
            continue  # pinned first, from its own index when one is named
        wanted.append(f"{spec}; {marker}" if marker else spec)
    return wanted


def _pip(python: Path, args: list[str], progress: Progress, label: str) -> None:
    progress(label)
    cmd = [str(python), "-m", "pip", "install", "--progress-bar", "on", *args]
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise SystemExit(f"fastcomplete: {label} failed (pip exited {result.returncode})")


def _torch_args() -> list[str]:
    index = os.environ.get(TORCH_INDEX_ENV)
    return [TORCH, "--index-url", index] if index else [TORCH]


def install_build_env(progress: Progress = print) -> Path:
    """Make both environments (once; each step is skipped when done) and return the build one's
    Python. A few GB of downloads from PyPI on a first run."""
    from models.genai_build import BUILDER_PINS

    build, builder = build_env_dir(), builder_env_dir()
    steps = 5
    if not env_python(build).is_file():
        progress(f"[1/{steps}] creating {build}")
        venv.EnvBuilder(with_pip=True).create(build)
    python = env_python(build)
    _pip(python, _torch_args(), progress, f"[2/{steps}] torch into {build.name} ({TORCH}, CPU)")
    _pip(
        python,
        _requirements("build"),
        progress,
        f"[3/{steps}] the model build's tools into {build.name}",
    )
    _link_packages(python)
    if not env_python(builder).is_file():
        venv.EnvBuilder(with_pip=True).create(builder)
    pins = [f"{p}=={v}" for p, v in BUILDER_PINS.items() if p != "torch"]
    _pip(env_python(builder), _torch_args(), progress, f"[4/{steps}] torch into {builder.name}")
    _pip(env_python(builder), pins, progress, f"[5/{steps}] the graph builder into {builder.name}")
    (build / ".complete").write_text("ok\n")
    progress(f"build environments ready under {fastcomplete_home()}")
    return python


def _link_packages(python: Path) -> None:
    """This installation's packages, importable from the build environment."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here = Path(sys.modules["models"].__file__ or "").resolve().parent.parent
    if not all((here / p).is_dir() for p in PACKAGES):
        raise SystemExit(f"fastcomplete: cannot find this installation's packages under {here}")
    (Path(site) / "fastcomplete-installation.pth").write_text(f"{here}\n")


def run_in_build_env(python: Path, argv: list[str]) -> int:
    """`fastcomplete <argv>` again, inside the build environment."""
    env = dict(os.environ)
    env["FASTCOMPLETE_BUILDER_PYTHON"] = str(env_python(builder_env_dir()))
    return subprocess.run(
        [str(python), "-m", "lsp_server.cli", *argv], env=env, check=False
    ).returncode
