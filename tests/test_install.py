"""The package as a person installs it: `python -m build`, then the wheel into a fresh virtual
environment (no torch) or with `uv tool install`; the installed `fastcomplete` serves a model the
repository's make target built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        check=True,
        timeout=600,
    )
    return out


def wheel(dist: Path) -> Path:
    return next(dist.glob("fastcomplete-*-py3-none-any.whl"))


def run(cmd: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def user_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    return {**env, "FASTCOMPLETE_HOME": str(home), "FASTCOMPLETE_KV_STORE_MB": "0", **extra}


def test_a_wheel_and_an_sdist_of_the_runtime(dist: Path) -> None:
    assert list(dist.glob("fastcomplete-*.tar.gz"))
    with zipfile.ZipFile(wheel(dist)) as whl:
        names = whl.namelist()
        metadata = whl.read(next(n for n in names if n.endswith("METADATA"))).decode()
        entry = whl.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert {n.split("/")[0] for n in names if "dist-info" not in n} == {
        "lsp_server",
        "inference",
        "models",
    }
    assert "models/data/validation_sample.py.txt" in names
    assert "fastcomplete = lsp_server.cli.main:main" in entry
    runtime = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    torch = [line for line in runtime if "torch" in line]
    assert torch and all("extra ==" in line for line in torch)  # only for building models


def test_a_fresh_venv_without_torch_serves_a_model_make_built(
    dist: Path, real_model: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python, exe = env_dir / "bin" / "python", env_dir / "bin" / "fastcomplete"
    home = real_model.parent.parent  # the models `make test-models` built
    env = user_env(home, FASTCOMPLETE_MODEL=real_model.name)
    installed = run([str(python), "-m", "pip", "install", "--quiet", str(wheel(dist))], env, 600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    no_torch = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
    assert run([str(python), "-c", no_torch], env).returncode == 0

    doctor = run([str(exe), "doctor"], env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"{real_model.name}/fast built" in doctor.stdout
    assert "--install-build-env" in doctor.stdout  # the build tools are not installed

    # An LSP session against the installed server: completions from both models, an explanation.
    demo = run([str(exe), "demo"], env, 600)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "fast (INT8)" in demo.stdout and "explain `load_orders`" in demo.stdout
    assert "Ignoring notification" not in demo.stdout + demo.stderr

    new_home = tmp_path / "new-home"
    build = run([str(exe), "models", "build", "--tiny"], user_env(new_home))
    assert build.returncode == 1
    assert "fastcomplete models build --install-build-env" in build.stderr
    assert "make models" in build.stderr

    # With consent, the build tools go under the home (once) and the build runs there.
    cmd = [str(exe), "models", "build", "--tiny", "--install-build-env", "--quiet"]
    build = run(cmd, user_env(new_home), 1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "build environments ready" in build.stdout
    assert (new_home / "models" / "tiny-llama" / "fast" / "manifest.json").is_file()
    doctor = run([str(exe), "doctor"], user_env(new_home, FASTCOMPLETE_MODEL="tiny-llama"))
    assert doctor.returncode == 0, doctor.stdout
    assert f"installed under {new_home / 'build-env'}" in doctor.stdout
    shutil.rmtree(new_home)  # two torch environments: gigabytes a CI machine needs back
    shutil.rmtree(env_dir)


def test_uv_tool_install_gives_a_working_command(
    dist: Path, real_model: Path, tmp_path: Path
) -> None:
    uv = Path(sys.executable).parent / "uv"
    tools = {
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    env = user_env(real_model.parent.parent, FASTCOMPLETE_MODEL=real_model.name, **tools)
    installed = run(
        [str(uv), "tool", "install", "--python", sys.executable, str(wheel(dist))], env, 600
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    doctor = run([str(tmp_path / "bin" / "fastcomplete"), "doctor", "--json"], env)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"{real_model.name}/standard built" in doctor.stdout
