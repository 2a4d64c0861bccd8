from __future__ import annotations

from pathlib import Path

from inference.completion_cache import CompletionCache, cache_key
from inference.engine import Engine, EngineConfig
from inference.generate import GenerationConfig
from inference.router import Task


def test_key_depends_on_everything_that_changes_output() -> None:
    base = cache_key("m/fast", "int8", [1, 2, 3], GenerationConfig().cache_key)
    assert base == cache_key("m/fast", "int8", [1, 2, 3], GenerationConfig().cache_key)
    assert base != cache_key("m/standard", "fp32", [1, 2, 3], GenerationConfig().cache_key)
    assert base != cache_key("m/fast", "int8", [1, 2, 4], GenerationConfig().cache_key)
    other = GenerationConfig(max_new_tokens=5).cache_key
    assert base != cache_key("m/fast", "int8", [1, 2, 3], other)
    # A deadline does not change what a finished generation says.
    assert base == cache_key("m/fast", "int8", [1, 2, 3], GenerationConfig(deadline_s=1).cache_key)


def test_hit_miss_and_persistence(tmp_path: Path) -> None:
    cache = CompletionCache(tmp_path / "cache")
    assert cache.get("k") is None
    cache.put("k", {"text": "x"})
    assert cache.get("k") == {"text": "x"}
    cache.close()
    again = CompletionCache(tmp_path / "cache")  # a new process: from disk
    assert again.get("k") == {"text": "x"}
    assert again.problem is None


def test_corrupt_directory_is_reported_once_and_bypassed(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / "cache.db").write_bytes(b"this is not sqlite" * 100)
    cache = CompletionCache(directory)
    assert cache.problem and "unusable" in cache.problem
    cache.put("k", "v")  # still works from memory
    assert cache.get("k") == "v"


def test_unwritable_directory_is_bypassed(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    cache = CompletionCache(blocker)
    assert cache.problem is not None
    cache.put("k", "v")
    assert cache.get("k") == "v"


def test_engine_serves_a_repeat_from_the_cache(tiny_model: Path, tmp_path: Path) -> None:
    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast",
            standard_dir=tiny_model / "standard",
            cache_dir=tmp_path / "cache",
        )
    )
    config = GenerationConfig(max_new_tokens=8)
    first = engine.generate(Task.COMPLETION, "def add(a, b):", config)
    second = engine.generate(Task.COMPLETION, "def add(a, b):", config)
    assert not first.cached and second.cached and second.text == first.text
    assert engine.stats()["models"]["tiny-llama/fast"]["cache_hits"] == 1
