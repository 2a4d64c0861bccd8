"""The engine on the real SmolLM2 models (built by `make test` before pytest runs)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from inference.generate import Finish, Generation, GenerationConfig
from inference.model import Model, load_model_dir
from inference.router import STANDARD, Task

pytestmark = pytest.mark.real_model


def _code() -> str:
    return (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text()


@pytest.fixture(scope="module")
def fast(real_model: Path) -> Model:
    return load_model_dir(real_model / "fast")


@pytest.fixture(scope="module")
def standard(real_model: Path) -> Model:
    return load_model_dir(real_model / "standard")


def _greedy(model: Model, ids: list[int], **kw: object) -> Generation:
    gen = Generation(model, ids, GenerationConfig(**{"max_new_tokens": 24, **kw}))
    gen.run()
    return gen


@pytest.mark.parametrize("variant", ["fast", "standard"])
def test_reuse_is_token_identical(variant: str, fast: Model, standard: Model) -> None:
    model = fast if variant == "fast" else standard
    ids = model.tokenizer.encode(_code())[:700]
    typed = ids[:650]  # the user went on typing after the first request's cursor
    model.pool.clear()
    fresh = _greedy(model, typed).result
    model.pool.clear()
    _greedy(model, ids[:600])
    reused = _greedy(model, typed).result
    assert reused.reused_tokens == 600
    assert reused.token_ids == fresh.token_ids


def test_fast_model_prompt_lookup_is_greedy(fast: Model) -> None:
    assert fast.runner.min_rows == 2  # int8 single-row kernels differ: every pass is widened
    ids = fast.tokenizer.encode(_code())[:900]
    plain = _greedy(fast, ids, max_new_tokens=40).result
    drafted = _greedy(fast, ids, max_new_tokens=40, draft_tokens=8).result
    assert drafted.token_ids == plain.token_ids
    assert drafted.accepted > 0


def test_single_line_stops_at_the_newline(fast: Model) -> None:
    prompt = "def area(radius):\n    return 3.14159 * radius"
    gen = _greedy(fast, fast.tokenizer.encode(prompt), max_new_tokens=32, stop_at_newline=True)
    assert gen.result.finish in (Finish.NEWLINE, Finish.EOS)
    assert "\n" not in gen.result.text


def test_engine_routes_by_mode_and_task(real_model: Path) -> None:
    engine = Engine(
        EngineConfig(
            fast_dir=real_model / "fast", standard_dir=real_model / "standard", cache_dir=None
        )
    )
    config = GenerationConfig(max_new_tokens=8)
    prompt = "import os\n\ndef list_files(root):\n    "
    assert engine.generate(Task.COMPLETION, prompt, config, fast_mode=True).variant == "fast"
    assert engine.generate(Task.COMPLETION, prompt, config, fast_mode=False).variant == STANDARD
    assert engine.generate(Task.EXPLAIN, prompt, config, fast_mode=True).variant == STANDARD
    stats = engine.stats()
    assert stats["models"]["smollm2-135m/fast"]["requests"] == 1
    assert stats["models"]["smollm2-135m/standard"]["requests"] == 2
    assert stats["models"]["smollm2-135m/fast"]["ttft_ms"]["n"] == 1
