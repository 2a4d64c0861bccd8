"""The decode loop on the tiny model (both variants): reuse identity, drafts, cancel, stops."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from inference.generate import Finish, Generation, GenerationConfig
from inference.kv_cache import PoolConfig
from inference.model import Model, load_model_dir
from inference.paths import VARIANTS
from models.validate import sample_text


@pytest.fixture(scope="module", params=VARIANTS)
def tiny(request: pytest.FixtureRequest, tiny_model: Path) -> Model:
    return load_model_dir(tiny_model / request.param)


def _ids(model: Model, n: int = 300) -> list[int]:
    return model.tokenizer.encode(sample_text())[:n]


def _run(model: Model, ids: list[int], **kw: object) -> Generation:
    gen = Generation(model, ids, GenerationConfig(**{"max_new_tokens": 24, **kw}))
    gen.run()
    return gen


def test_kv_reuse_is_token_identical(tiny: Model) -> None:
    ids = _ids(tiny)
    edited = ids[:250] + ids[260:290]  # a later keystroke: same start, different tail
    tiny.pool.clear()
    fresh = _run(tiny, edited)
    assert fresh.result.reused_tokens == 0
    tiny.pool.clear()
    _run(tiny, ids)  # fills the cache with the first version
    reused = _run(tiny, edited)
    assert reused.result.reused_tokens == 250
    assert reused.result.token_ids == fresh.result.token_ids


def test_prompt_lookup_keeps_greedy_output(tiny: Model) -> None:
    ids = _ids(tiny)
    plain = _run(tiny, ids, max_new_tokens=40)
    drafted = _run(tiny, ids, max_new_tokens=40, draft_tokens=6)
    assert drafted.result.token_ids == plain.result.token_ids
    assert drafted.result.drafted > 0
    assert drafted.result.forward_passes <= plain.result.forward_passes


def test_cancel_stops_within_one_step(tiny: Model) -> None:
    cancel = threading.Event()
    gen = Generation(tiny, _ids(tiny), GenerationConfig(max_new_tokens=50), cancel)
    passes_at_cancel = None
    for i, _ in enumerate(gen):
        if i == 3:
            cancel.set()
            passes_at_cancel = gen.result.forward_passes
    assert gen.result.finish is Finish.CANCELLED
    assert gen.result.forward_passes == passes_at_cancel  # no forward pass after the flag
    assert gen.result.new_tokens < 50


def test_cancel_before_start_and_mid_prefill(tiny: Model) -> None:
    cancel = threading.Event()
    cancel.set()
    gen = Generation(tiny, _ids(tiny), GenerationConfig(), cancel)
    assert gen.run().finish is Finish.CANCELLED and gen.result.forward_passes == 0
    tiny.pool.clear()
    cancel = threading.Event()

    class CancelAfterFirstChunk:
        spec = tiny.runner.spec

        def forward(self, *args: object) -> object:
            cancel.set()  # as if the editor cancelled while the first chunk ran
            return tiny.runner.forward(*args)

    model = dataclasses.replace(tiny, runner=CancelAfterFirstChunk())
    long_prompt = (_ids(tiny, 2000) * 4)[:3000]  # six prefill chunks
    gen = Generation(model, long_prompt, GenerationConfig(), cancel)
    assert gen.run().finish is Finish.CANCELLED
    assert gen.result.forward_passes == 1


def test_a_stopped_prefill_keeps_what_it_computed(tiny: Model) -> None:
    """A prefill cancelled after two chunks leaves those chunks' KV in the pool: the next run
    of the same prompt starts from there, and gives what a run from scratch gives."""
    tiny.pool.clear()
    prompt = (_ids(tiny, 2000) * 4)[:1000]
    cancel = threading.Event()
    calls = 0

    class CancelAfterTwoChunks:
        spec = tiny.runner.spec
        min_rows = tiny.runner.min_rows

        def forward(self, *args: object) -> object:
            nonlocal calls
            calls += 1
            if calls == 2:
                cancel.set()
            return tiny.runner.forward(*args)

    model = dataclasses.replace(tiny, runner=CancelAfterTwoChunks())
    config = GenerationConfig(max_new_tokens=8, prefill_chunk=128)
    assert Generation(model, prompt, config, cancel).run().finish is Finish.CANCELLED
    assert tiny.pool.cached_tokens(prompt) == 256
    resumed = Generation(tiny, prompt, config).run()
    assert resumed.reused_tokens == 256
    tiny.pool.clear()
    assert Generation(tiny, prompt, config).run().token_ids == resumed.token_ids


def test_deadline_is_honoured(tiny: Model) -> None:
    gen = Generation(tiny, _ids(tiny), GenerationConfig(max_new_tokens=10_000, deadline_s=0.3))
    started = time.perf_counter()
    assert gen.run().finish is Finish.DEADLINE
    assert time.perf_counter() - started < 1.0
    assert 0 < gen.result.new_tokens < 10_000


def test_max_tokens_and_stop_string(tiny: Model) -> None:
    ids = _ids(tiny)
    full = _run(tiny, ids, max_new_tokens=20)
    assert full.result.finish is Finish.LENGTH and full.result.new_tokens == 20
    text = full.result.text
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    assert stop and stop in text
    cut = _run(tiny, ids, max_new_tokens=20, stop_strings=(stop,))
    assert cut.result.finish is Finish.STOP
    assert cut.result.text == text[: text.index(stop)]
    assert "".join(Generation(tiny, ids, cut.config)) == cut.result.text  # streamed == final


def test_eos_stops(tiny: Model) -> None:
    ids = _ids(tiny)
    first = _run(tiny, ids, max_new_tokens=10).result.token_ids
    stopper = first[4]
    manifest = dataclasses.replace(tiny.manifest, eos_token_ids=[stopper])
    model = dataclasses.replace(tiny, manifest=manifest)
    gen = _run(model, ids, max_new_tokens=10)
    assert gen.result.finish is Finish.EOS
    assert gen.result.token_ids == first[: first.index(stopper)]


def test_sampling_is_reproducible_with_a_seed(tiny: Model) -> None:
    ids = _ids(tiny)
    a = _run(tiny, ids, temperature=1.0, top_p=0.95, seed=7).result.token_ids
    b = _run(tiny, ids, temperature=1.0, top_p=0.95, seed=7).result.token_ids
    c = _run(tiny, ids, temperature=1.0, top_p=0.95, seed=8).result.token_ids
    assert a == b
    assert a != c


def test_bad_prompts_are_refused(tiny: Model) -> None:
    with pytest.raises(ValueError, match="empty prompt"):
        Generation(tiny, [])
    with pytest.raises(ValueError, match="vocabulary"):
        Generation(tiny, [1, 2, 10**9])


def test_warm_up_prefills_without_generating(tiny: Model) -> None:
    ids = _ids(tiny)
    tiny.pool.clear()
    warm = _run(tiny, ids, max_new_tokens=0)
    assert warm.result.new_tokens == 0 and warm.result.finish is Finish.LENGTH
    assert _run(tiny, [*ids, 42]).result.reused_tokens == len(ids)


def test_a_prompt_longer_than_the_kv_slot_keeps_its_end(tiny_model: Path) -> None:
    """A prompt past the slot's capacity is trimmed from the start, never "length" with nothing."""
    model = load_model_dir(tiny_model / "fast", pool_config=PoolConfig(capacity_tokens=128))
    ids = _ids(model)
    assert len(ids) > 128
    config = GenerationConfig(max_new_tokens=16, draft_tokens=4)
    gen = Generation(model, ids, config)
    gen.run()
    kept = 128 - 16 - 1
    assert gen.result.trimmed_tokens == len(ids) - kept
    assert gen.result.prompt_tokens == kept and gen.prompt == ids[-kept:]
    # "length" only because all 16 tokens asked for were generated.
    assert gen.result.finish is not Finish.LENGTH or gen.result.new_tokens == 16
    # The same end of the prompt, given on its own, continues the same way.
    alone = Generation(load_model_dir(tiny_model / "fast"), ids[-kept:], config)
    alone.run()
    assert alone.result.token_ids == gen.result.token_ids


def test_asking_for_more_tokens_than_the_slot_holds_still_generates(tiny_model: Path) -> None:
    model = load_model_dir(tiny_model / "fast", pool_config=PoolConfig(capacity_tokens=128))
    gen = Generation(model, _ids(model), GenerationConfig(max_new_tokens=1000, draft_tokens=8))
    gen.run()
    assert gen.result.prompt_tokens == 128 - 64 - 1  # the tokens asked for get half the slot
    if gen.result.finish is Finish.LENGTH:  # the slot filled up: every row was used
        assert gen.result.prompt_tokens + gen.result.new_tokens >= 127


def test_next_line_mode_stops_at_the_end_of_the_line_after(tiny: Model) -> None:
    """A suggestion after the end of a line starts with the newline: the line it starts ends it."""
    config = GenerationConfig(stop_at_newline=True, next_line=True)
    gen = Generation(tiny, _ids(tiny, 20), config)
    assert gen._line_end("\n    return x\n    y") == len("\n    return x")
    assert gen._line_end("\n    ") == -1  # only the indentation so far: go on
    plain = Generation(tiny, _ids(tiny, 20), GenerationConfig(stop_at_newline=True))
    assert plain._line_end("\n    return x") == 0
    assert config.cache_key != GenerationConfig(stop_at_newline=True).cache_key


def test_a_block_answer_stops_where_the_block_is_left(tiny: Model) -> None:
    """A block answer ends before a later line that leaves its indentation or opens a fence
    (post-processing would cut there anyway): the decode loop writes no further."""
    block = Generation(tiny, _ids(tiny, 20), GenerationConfig(block_indent=8))
    assert block._block_end("x = 1\n        y = 2\n    return y") == len("x = 1\n        y = 2")
    assert block._block_end("x = 1\n        y = 2\n    ") == -1  # not written yet
    assert block._block_end("x = 1\n\n        y") == -1  # a blank line is not leaving it
    assert block._block_end("x = 1\n        ```\n") == len("x = 1")
    assert block._cut("x = 1\n    return y") is Finish.STOP
    free = Generation(tiny, _ids(tiny, 20), GenerationConfig())
    assert free._block_end("x = 1\n    return y") == -1
    assert GenerationConfig(block_indent=8).cache_key != GenerationConfig().cache_key


def test_a_block_plan_asks_the_decode_loop_to_stop_where_post_processing_cuts() -> None:
    from lsp_server.completion.plan import next_line_plan, plan_completion
    from lsp_server.completion.postprocess import block_floor, postprocess
    from lsp_server.config.settings import Settings

    text = "class A:\n    def f(self):\n        "
    plan = plan_completion(text, 2, 8, Settings())
    assert not plan.site.single_line and plan.config.block_indent == block_floor(plan.site) == 8
    answer = "x = 1\n        return x\n    def g(self):"
    cut = answer[: Generation._block_end(SimpleNamespace(config=plan.config), answer)]
    assert cut == postprocess(answer, plan.site) == "x = 1\n        return x"
    line = plan_completion("x = 1", 0, 5, Settings())
    assert line.config.block_indent is None  # one line: the newline ends it
    assert next_line_plan(line).config.block_indent is None  # the next line may dedent


def test_a_looping_model_is_stopped() -> None:
    from inference.repetition import ends_in_loop

    assert ends_in_loop('r, Op: "dyn", Op: "dyn", Op: "dyn", Op: "dyn", ')
    assert ends_in_loop("x_possible_max_max_max_max")
    assert not ends_in_loop("x_possible_max_max_max")  # three: it may still become code
    assert not ends_in_loop("os.path.join(root, name)")
    later = "".join(f"x{i} = {i}\n" for i in range(30))
    assert not ends_in_loop("_max_max_max_max" + later)  # a loop earlier is left


def test_the_background_prefill_chunk_is_sized_by_the_prefill_rate() -> None:
    """About T_WARM_CHUNK_MS of work a chunk: a slow model's chunks stay small (a key waits
    for at most one), a fast one's grow to the largest (fewer, cheaper passes)."""
    from inference.serving import warm_chunk_tokens

    assert warm_chunk_tokens(0.002) == 64  # Qwen 0.5B on 2 cores
    assert warm_chunk_tokens(0.0005) == 256  # SmolLM2
    assert warm_chunk_tokens(0.05) == 32  # never less than the smallest
    assert warm_chunk_tokens(1e-5) == 256  # a GPU: never more than the largest


def _shifting(tiny_model: Path, variant: str) -> Model:
    return load_model_dir(tiny_model / variant, pool_config=PoolConfig(shift_tail=True))


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_moved_tail_is_put_back_at_its_new_positions(tiny_model: Path, variant: str) -> None:
    """A key typed before a FIM suffix: the suffix's cached KV moves (keys re-rotated) instead
    of being computed again. The first layer's keys and values depend on the token and its
    position only, so there they must equal a from-scratch computation of the new prompt."""
    model = _shifting(tiny_model, variant)
    assert model.pool.rope is not None
    ids = _ids(model, 260)
    head, middle, tail, last = ids[:120], ids[120:126], ids[126:259], ids[259]
    before = [*head, *middle, last - 1, *tail, last]  # the prompt before the key
    after = [*head, *middle, 17, 18, *tail, last]  # a key replaced one token with two
    model.pool.clear()
    _run(model, before, max_new_tokens=4)
    moved = _run(model, after, max_new_tokens=0).result
    assert moved.reused_tokens == len(head) + len(middle)
    assert moved.forward_passes == 2  # the middle, then the last token: not the tail
    slot = model.pool.slots[0]
    assert slot.tokens[: len(after)] == after
    assert slot.arrays is not None
    got = [a[0, :, : len(after), :].copy() for a in slot.arrays[:2]]
    model.pool.clear()
    _run(model, after, max_new_tokens=0)
    fresh = [a[0, :, : len(after), :] for a in model.pool.slots[0].arrays[:2]]
    for mine, theirs in zip(got, fresh, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-4)


def test_without_a_rotary_base_nothing_moves(tiny_model: Path) -> None:
    model = load_model_dir(tiny_model / "fast")  # shift_tail is off by default
    assert model.pool.rope is None
    ids = _ids(model, 200)
    model.pool.clear()
    _run(model, [*ids[:100], 5, *ids[100:]], max_new_tokens=0)
    again = _run(model, [*ids[:100], 6, 7, *ids[100:]], max_new_tokens=0, prefill_chunk=8)
    assert again.result.reused_tokens == 100
    assert again.result.forward_passes == 13  # 102 tokens computed, 8 at a time


def test_a_prefill_cut_short_still_measures_the_day_s_rate(tiny_model: Path) -> None:
    """The rate a request is planned on comes from every prefill pass as it runs: a background
    prefill that a request interrupts has told the engine the day's rate already (a fresh
    server's first asks were planned on the default, 2x too fast, and timed out)."""
    from inference.engine import Engine, EngineConfig
    from inference.router import FAST
    from inference.tuning import PREFILL_S_PER_TOKEN

    engine = Engine(
        EngineConfig(
            fast_dir=tiny_model / "fast", standard_dir=tiny_model / "standard", cache_dir=None
        )
    )
    model = engine.load(FAST)
    assert engine.prefill_s_per_token(model.model_id) == PREFILL_S_PER_TOKEN  # nothing ran yet
    cancel = threading.Event()
    passes = 0

    def stop_after_two() -> None:
        nonlocal passes
        passes += 1
        if passes > 2:
            cancel.set()

    config = GenerationConfig(max_new_tokens=0, prefill_chunk=64)
    gen = Generation(model, _ids(model), config, cancel, pause=stop_after_two)
    assert gen.run().finish is Finish.CANCELLED and passes == 3  # two 64-token passes ran
    measured = model.runner.prefill_s_per_token
    assert measured is not None and engine.prefill_s_per_token(model.model_id) == measured
