from __future__ import annotations

from pathlib import Path

import pytest

from inference.kv_cache import KVPool, PoolConfig, common_prefix
from inference.metrics import Metrics, Window, percentile
from inference.model import load_model_dir


def test_percentiles_over_a_sliding_window() -> None:
    window = Window(size=100)
    for v in range(1, 201):  # only 101..200 stay
        window.add(float(v))
    p = window.percentiles()
    assert p["n"] == 100
    assert (p["p50"], p["p95"], p["p99"]) == (150.0, 195.0, 199.0)  # nearest rank
    assert Window().percentiles()["p50"] is None


def test_a_percentile_is_a_value_that_was_measured() -> None:
    """The one percentile of the project (the stats, the GPU default's p95, the eval, benches)."""
    assert percentile([30.0, 10.0, 20.0], 0.5) == 20.0
    assert percentile(range(1, 9), 0.95) == 8  # a few runs: the p95 is the slowest
    assert percentile(range(1, 21), 0.95) == 19
    assert percentile(range(1, 101), 0.55) == 55  # 0.55 * 100 > 55 in floating point
    assert percentile([7.0], 0.0) == percentile([7.0], 1.0) == 7.0
    with pytest.raises(ValueError):
        percentile([], 0.95)


def test_metrics_snapshot_is_plain_data() -> None:
    metrics = Metrics()
    metrics.count("m/fast", "requests")
    metrics.record_generation(
        "m/fast",
        prompt_tokens=100,
        reused_tokens=90,
        new_tokens=5,
        ttft_s=0.05,
        tpot_s=0.01,
        total_s=0.09,
    )
    snap = metrics.snapshot()["models"]["m/fast"]
    assert snap["requests"] == 1 and snap["kv_reuse_share"] == 0.9
    assert snap["ttft_ms"]["p50"] == pytest.approx(50.0)
    assert snap["tokens_per_s"]["p50"] == pytest.approx(100.0)


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


def test_pool_picks_the_longest_prefix_and_respects_the_budget(tiny_model: Path) -> None:
    spec = load_model_dir(tiny_model / "standard").spec
    pool = KVPool(spec, shared_buffers=False, config=PoolConfig(budget_bytes=10**9))
    a, reused = pool.lease([1, 2, 3, 4])
    assert reused == 0
    a.tokens[:] = [1, 2, 3, 4]
    pool.release(a)
    b, _ = pool.lease([9, 9])  # no shared prefix: a new slot, a is kept
    b.tokens[:] = [9, 9]
    pool.release(b)
    c, reused = pool.lease([1, 2, 3, 7])
    assert c is a and reused == 3 and c.tokens == [1, 2, 3]
    pool.release(c)
    # The whole prompt is never reused: the last token is fed again to get its logits.
    d, reused = pool.lease([1, 2, 3])
    assert reused == 2
    pool.release(d)
    # A long sequence (a prefill in progress) is not given up to reuse a shared file header:
    long = list(range(100, 400))
    e, _ = pool.lease(long)
    e.tokens[:] = long
    pool.release(e)
    f, reused = pool.lease([*long[:10], 7, 7, 7])
    assert f is not e and reused == 0 and e.tokens == long
    pool.release(f)
    g, reused = pool.lease([*long[:200], 5])  # reusing most of it is what it is kept for
    assert g is e and reused == 200
    pool.release(g)
    tight = KVPool(spec, shared_buffers=False, config=PoolConfig(budget_bytes=0))
    s, _ = tight.lease([1, 2])
    s.tokens[:] = [1, 2]
    assert tight.bytes_used() == 2 * spec.kv_bytes_per_token
    tight.release(s)
    assert tight.bytes_used() == 0 and tight.slots == []  # evicted on release: over budget
