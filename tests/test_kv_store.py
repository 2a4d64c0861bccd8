"""The KV store: prompts' KV on disk, found again by a fresh model (a reopened file, the next
server), checked before use, bounded, and never a reason for a request to fail."""

from __future__ import annotations

import errno
import multiprocessing
import threading
from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from inference.generate import Generation, GenerationConfig
from inference.kv_store import CorruptEntry, KVStore, _decode
from inference.model import Model
from inference.router import FAST, Task
from inference.serving import Tokens
from inference.tuning import KV_STORE_BLOCK_TOKENS, KV_STORE_MIN_TOKENS
from models.validate import sample_text


def _engine(tiny_model: Path, store: Path | None, size: int = 64 << 20) -> Engine:
    return Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast",
            standard_dir=tiny_model / "standard",
            cache_dir=None,
            kv_store_dir=store,
            kv_store_bytes=size if store is not None else 0,
        )
    )


def _ids(model: Model, n: int = 600) -> list[int]:
    ids = model.tokenizer.encode(sample_text() * 4)[:n]
    assert len(ids) == n
    return ids


def _warm(engine: Engine, ids: list[int]) -> Model:
    """The background prefill's path: Engine.warm, then the store's pending write."""
    model = engine.load(FAST)
    serving = engine.serving_plan(Task.COMPLETION)
    engine.warm(serving, "", Tokens(model.tokenizer_id, tuple(ids)), threading.Event())
    assert model.pool.store is not None
    model.pool.store.flush()
    return model


def _plain_ids(tiny_model: Path) -> list[int]:
    return _ids(_engine(tiny_model, None).load(FAST))


def _answer(model: Model, ids: list[int]) -> Generation:
    gen = Generation(model, ids, GenerationConfig(max_new_tokens=12))
    gen.run()
    return gen


def test_a_fresh_model_finds_the_prompt_on_disk_and_answers_the_same(
    tiny_model: Path, tmp_path: Path
) -> None:
    baseline = _engine(tiny_model, None).load(FAST)
    ids = _ids(baseline)
    plain = _answer(baseline, ids).result
    assert plain.reused_tokens == 0

    _warm(_engine(tiny_model, tmp_path / "kv"), ids)  # the first server, which prefilled it
    reopened = _engine(tiny_model, tmp_path / "kv").load(FAST)  # the next one: empty memory
    blocks = len(ids) // KV_STORE_BLOCK_TOKENS * KV_STORE_BLOCK_TOKENS
    assert reopened.pool.cached_tokens(ids) == blocks
    again = _answer(reopened, ids).result
    assert again.reused_tokens == blocks
    assert again.token_ids == plain.token_ids and again.logprobs == plain.logprobs
    # A prompt sharing only a head (the cursor elsewhere in the file) finds that head.
    elsewhere = ids[:400] + ids[450:]
    third = _engine(tiny_model, tmp_path / "kv").load(FAST)
    assert _answer(third, elsewhere).result.reused_tokens == 384
    assert third.pool.store is not None and third.pool.store.counts["hits"] == 1


def test_a_corrupt_entry_is_dropped_and_the_answer_is_computed(
    tiny_model: Path, tmp_path: Path
) -> None:
    ids = _plain_ids(tiny_model)
    model = _warm(_engine(tiny_model, tmp_path / "kv"), ids)
    expected = _answer(_engine(tiny_model, None).load(FAST), ids).result.token_ids
    stored = [p for p in (tmp_path / "kv").rglob("*.val")]
    assert stored, "a prompt of this size is stored as a file of its own"
    for path in stored:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    fresh = _engine(tiny_model, tmp_path / "kv").load(FAST)
    result = _answer(fresh, ids).result
    assert result.reused_tokens == 0 and result.token_ids == expected
    assert fresh.pool.store is not None and fresh.pool.store.counts["corrupt"] == 1
    assert fresh.pool.store.load(ids) is None  # deleted, not read again
    assert model.pool.store is not None


def test_another_model_never_reads_an_entry(tiny_model: Path, tmp_path: Path) -> None:
    ids = _plain_ids(tiny_model)
    model = _warm(_engine(tiny_model, tmp_path / "kv"), ids)
    assert model.pool.store is not None
    other = KVStore(tmp_path / "kv", 64 << 20, "another-model")
    assert other.longest(ids) is None and other.load(ids) is None
    # An entry read under another model's key (its pointer copied over) is refused by its header.
    head = model.pool.store.longest(ids)
    assert head is not None
    with pytest.raises(CorruptEntry, match="another model"):
        _decode("another-model", model.pool.store._cache.get(head.entry))


def test_a_full_disk_loses_the_entry_not_the_request(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(tiny_model, tmp_path / "kv")
    model = engine.load(FAST)
    store = model.pool.store
    assert store is not None

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._cache, "set", full)
    ids = _ids(model)
    _warm(engine, ids)
    assert store.counts["saved"] == 0 and "No space left" in (store.problem or "")
    assert engine.stats()["kv_store"][FAST]["problem"] == store.problem
    assert len(_answer(model, ids).result.token_ids) > 0


def test_the_store_stays_within_its_size(tiny_model: Path, tmp_path: Path) -> None:
    engine = _engine(tiny_model, tmp_path / "kv", size=1 << 20)
    model = engine.load(FAST)
    ids = _ids(model)
    for shift in range(12):  # twelve different prompts, each about 300 KB of KV
        _warm(engine, [ids[0] + shift % 7, *ids[1:]][: 300 + 20 * shift])
        model.pool.clear()
    store = model.pool.store
    assert store is not None and store.counts["saved"] == 12
    assert store.stats()["bytes"] <= 2 << 20  # diskcache culls back to the limit on each write


def _hammer(folder: str, tiny_model: str, seed: int, out: multiprocessing.Queue) -> None:
    """A second server on the same folder: writes its own prompts, reads the other's."""
    engine = _engine(Path(tiny_model), Path(folder))
    model = engine.load(FAST)
    base = _ids(model)
    found = 0
    for round_ in range(4):
        mine = [base[0] + seed, round_, *base[2 : KV_STORE_MIN_TOKENS + 64]]
        _warm(engine, mine)
        theirs = [base[0] + 1 - seed, round_, *base[2 : KV_STORE_MIN_TOKENS + 64]]
        assert model.pool.store is not None
        kv = model.pool.store.load(theirs)
        found += kv is not None
        model.pool.clear()
    out.put((seed, found, model.pool.store.counts["corrupt"]))


def test_two_servers_share_one_folder(tiny_model: Path, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    procs = [
        ctx.Process(target=_hammer, args=(str(tmp_path / "kv"), str(tiny_model), s, out))
        for s in (0, 1)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = sorted(out.get(timeout=5) for _ in procs)
    assert [r[2] for r in results] == [0, 0]  # nothing either read was damaged
    # Each wrote all four of its prompts where the other (and a third) can read them.
    reader = _engine(tiny_model, tmp_path / "kv").load(FAST).pool.store
    assert reader is not None
    base = _plain_ids(tiny_model)
    for seed in (0, 1):
        for round_ in range(4):
            prompt = [base[0] + seed, round_, *base[2 : KV_STORE_MIN_TOKENS + 64]]
            assert reader.load(prompt) is not None
