"""Shared fixtures: one tiny model built per session, copied into per-test homes when tests mutate."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.paths import fastcomplete_home
from models.build import BuildRequest, build
from models.choice import default_model as default_model_name
from models.tiny import TINY_NAME


@pytest.fixture(scope="session")
def shared_home() -> Path:
    """The user's FASTCOMPLETE_HOME: built models are cached there across runs (CI sets it)."""
    return fastcomplete_home()


@pytest.fixture(scope="session")
def tiny_model(shared_home: Path) -> Path:
    """The tiny model's folder (built on first use, then reused from the cache)."""
    return build(BuildRequest(tiny=True), quiet=True).path


# Most real-model tests run on the smallest real model, SmolLM2 (fast on 2 cores, expectations
# written for it); `default_model` is the product's default, for the tests of what a new user gets.
SMALL_REAL_MODEL = "smollm2-135m"


@pytest.fixture(scope="session")
def real_model(shared_home: Path) -> Path:
    """The real SmolLM2 models: `make test` builds them before pytest; built here if missing."""
    return build(BuildRequest(model=SMALL_REAL_MODEL), quiet=True).path


# The code model (fill-in-the-middle, repository-level prompts): its own end-to-end tests.
CODE_MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="session")
def default_model(shared_home: Path) -> Path:
    """This machine's default catalogue model, as `make demo` builds it for a new user."""
    return build(BuildRequest(model=default_model_name()), quiet=True).path


@pytest.fixture(scope="session")
def code_model(shared_home: Path) -> Path:
    """Qwen2.5-Coder-0.5B: `make test` builds it before pytest; built here if missing."""
    return build(BuildRequest(model=CODE_MODEL), quiet=True).path


@pytest.fixture(autouse=True, scope="session")
def no_kv_store() -> Iterator[None]:
    """The KV store off for every server and engine a test starts (it lives in the shared home,
    and a prompt stored by one test would be warm for the next): its own tests turn it on in a
    folder of their own."""
    old = os.environ.get("FASTCOMPLETE_KV_STORE_MB")
    os.environ["FASTCOMPLETE_KV_STORE_MB"] = "0"
    yield
    if old is None:
        os.environ.pop("FASTCOMPLETE_KV_STORE_MB", None)
    else:
        os.environ["FASTCOMPLETE_KV_STORE_MB"] = old


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty FASTCOMPLETE_HOME of the test's own."""
    path = tmp_path / "home"
    monkeypatch.setenv("FASTCOMPLETE_HOME", str(path))
    yield path


@pytest.fixture
def home_with_tiny(tiny_model: Path, home: Path) -> Path:
    """A private home holding a copy of the tiny model, for tests that damage or rebuild it."""
    shutil.copytree(tiny_model, home / "models" / TINY_NAME)
    assert os.environ["FASTCOMPLETE_HOME"] == str(home)
    return home


# What needs a built model (or builds one): `make unit` leaves these out with -m "not model".
MODEL_FIXTURES = frozenset({"tiny_model", "real_model", "code_model", "default_model"})
MODEL_MARKERS = frozenset({"real_model", "vscode", "vllm", "model"})


LSP_SUITE = Path(__file__).parent / "lsp"  # each test starts the server on a model


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            fixtures & MODEL_FIXTURES
            or any(item.get_closest_marker(m) for m in MODEL_MARKERS)
            or LSP_SUITE in item.path.parents
        ):
            item.add_marker(pytest.mark.model)
