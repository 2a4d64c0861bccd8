"""The engine the server and CLI talk to: route -> cache -> generate -> metrics.

Synchronous by design: callers run it on a worker thread and stop it with the cancel flag.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from inference.chat import render_chat
from inference.completion_cache import CompletionCache, cache_key
from inference.errors import ModelLoadError, NoModel
from inference.generate import Finish, Generation, GenerationConfig, GenerationResult
from inference.healing import heal
from inference.kv_cache import PoolConfig
from inference.kv_store import open_store
from inference.loading import folder_loaders, variant_dirs
from inference.metrics import Metrics
from inference.model import Model, load_model_dir
from inference.paths import (
    fastcomplete_home,
    kv_store_bytes,
)
from inference.remote import RemoteConfig, RemoteModel
from inference.router import FAST, REMOTE, STANDARD, Route, Router, Task
from inference.scoring import continuation_logprob, split_shared
from inference.serving import ServingPlan, Tokens, warm_chunk_tokens
from inference.session import SessionConfig
from inference.tuning import (
    BREAKER_COOLDOWN_S,
    BREAKER_FAILURES,
    COMPLETION_CACHE_BYTES,
    COMPLETION_CACHE_ITEMS,
    PREFILL_S_PER_TOKEN,
)

CACHEABLE = frozenset({Finish.EOS, Finish.STOP, Finish.NEWLINE, Finish.LENGTH})


@dataclass(frozen=True)
class EngineConfig:
    # The built model to serve: the caller chooses it (models/choice.py: selected_model), so that
    # making a config probes no device. None: both folders below are given.
    model_name: str | None = None
    fast_dir: Path | None = None  # explicit model folders override the name
    standard_dir: Path | None = None
    session: SessionConfig = SessionConfig()
    pool: PoolConfig = PoolConfig()
    cache_dir: Path | None = field(default_factory=lambda: fastcomplete_home() / "cache")
    cache_bytes: int = COMPLETION_CACHE_BYTES
    # Prompts' KV on disk (inference/kv_store.py): a file seen before is warm at once. None: off.
    kv_store_dir: Path | None = field(default_factory=lambda: fastcomplete_home() / "kv")
    kv_store_bytes: int = field(default_factory=lambda: kv_store_bytes())
    # 0: no in-memory layer (benchmarks that must not hit it)
    cache_memory_items: int = COMPLETION_CACHE_ITEMS
    breaker_threshold: int = BREAKER_FAILURES
    breaker_cooldown_s: float = BREAKER_COOLDOWN_S
    remote: RemoteConfig | None = None  # an OpenAI-compatible server in front of `standard`
    verify_hashes: bool = False  # sha256 of every model file at load time
    # False: a completion is served only by models already loaded (the server loads the standard
    # model in the background on first use, never inside a keystroke's request).
    completions_load_models: bool = True


@dataclass
class EngineResult:
    text: str
    variant: str
    model_id: str
    finish: Finish
    cached: bool
    fallback_reason: str | None  # why the route's first model did not serve; None when it did
    generation: GenerationResult | None  # None for cache hits and remote answers
    logprobs: tuple[float, ...] = ()  # each token's, when a local model made it (cached too)

    @property
    def fallback(self) -> bool:
        return self.fallback_reason is not None


def _load(directory: Path, config: EngineConfig) -> Model:
    if not directory.exists():
        raise NoModel(f"not built: {directory} (run `fastcomplete models build`)")
    model = load_model_dir(directory, config.session, config.pool, config.verify_hashes)
    # Healing and the names' bonus index the vocabulary on first use: ~0.25 s for Qwen's
    # 151k tokens, which the first mid-word ask used to pay (419 -> 99 ms measured).
    _ = model.tokenizer.vocab_index
    model.pool.store = open_store(model.manifest, config.kv_store_dir, config.kv_store_bytes)
    return model


def _healed(
    model: Model, ids: list[int], config: GenerationConfig
) -> tuple[list[int], GenerationConfig]:
    """Token healing at the cursor (inference/healing.py). In a FIM prompt the cursor is where
    the prefix ends, before the suffix token: the prefix is backed off there, and the suffix and
    middle token follow it unchanged."""
    if not config.heal or config.constraint:
        return ids, config
    cut = len(ids)
    fim = model.manifest.fim
    if fim is not None:
        # The cursor is where the prefix ends: before the suffix token (PSM), or before the
        # middle token (SPM: the suffix came first).
        end_id = model.tokenizer.special_id(fim.middle if fim.order == "spm" else fim.suffix)
        if end_id is not None and end_id in ids:
            cut = ids.index(end_id)
    healed = heal(ids[:cut], model.tokenizer)
    return healed.ids + ids[cut:], replace(config, constraint=healed.prefix)


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        loaders: dict[str, Callable[[], Any]] | None = None,
    ) -> None:
        """`loaders`: how each variant's model is made (default: loaded from its folder; tests
        pass scripted ones)."""
        self.config = config
        self.metrics = Metrics()
        dirs = variant_dirs(config.model_name, config.fast_dir, config.standard_dir)
        if loaders is None:
            loaders = folder_loaders(dirs, lambda directory: _load(directory, config))
        loaders = dict(loaders)  # the remote joins our own copy
        if config.remote is not None:
            remote = RemoteModel(config.remote)
            loaders[REMOTE] = lambda: remote
        self.router: Router[Any] = Router(
            loaders,
            self.metrics,
            config.breaker_threshold,
            config.breaker_cooldown_s,
            remote_completions=bool(config.remote and config.remote.completions),
            completions_load=config.completions_load_models,
        )
        self.cache = CompletionCache(
            config.cache_dir, config.cache_bytes, config.cache_memory_items
        )

    def load(self, variant: str) -> Model:
        """Load a model now (the server does this in the background after initialize)."""
        try:
            return self.router.model(variant)
        except NoModel as exc:
            raise ModelLoadError(str(exc)) from exc

    def route(self, task: Task, fast_mode: bool = True) -> Route:
        return self.router.route(task, fast_mode)

    def serving_plan(self, task: Task, fast_mode: bool = True) -> ServingPlan:
        """Who serves `task` now and how its prompt is made: the one model choice of a request."""
        route = self.route(task, fast_mode)
        model = self._planning_model(route)
        # A remote in front takes the prompt as text, in its own FIM form when it has one.
        remote = self.config.remote if route.preferred == REMOTE else None
        remote_fim = remote.fim if remote is not None else None
        fim = remote_fim or (model.manifest.fim if model else None)
        rate = self.prefill_s_per_token(model.model_id) if model else PREFILL_S_PER_TOKEN
        return ServingPlan(route, model, fim, rate)

    def _planning_model(self, route: Route) -> Model | None:
        """The loaded local model that would serve first on `route` (Router.why_not's rule)."""
        for variant in route.order:
            model = self.router.loaded(variant)
            if isinstance(model, Model) and self.router.why_not(variant, route.task) is None:
                return model
        return None

    def prefill_s_per_token(self, model_id: str) -> float:
        """Seconds a prompt token takes to prefill on the loaded model `model_id`, as its
        runner measured them (PREFILL_S_PER_TOKEN before it has)."""
        for variant in (FAST, STANDARD):
            model = self.router.loaded(variant)
            if isinstance(model, Model) and model.model_id == model_id and model.runner:
                return model.runner.prefill_s_per_token or PREFILL_S_PER_TOKEN
        return PREFILL_S_PER_TOKEN

    def generate(
        self,
        task: Task,
        prompt: str | list[int],
        config: GenerationConfig = GenerationConfig(),
        *,
        fast_mode: bool = True,
        route: Route | None = None,
        tokens: Tokens | None = None,
        cancel: threading.Event | None = None,
        on_text: Callable[[str], None] | None = None,
        pause: Callable[[], None] | None = None,
        messages: list[dict[str, str]] | None = None,
    ) -> EngineResult:
        """Run one request on `route` (default: the task's route in this mode).

        `tokens`: `prompt` already encoded (by a planner); used by a model with that tokenizer.
        `messages`: a chat; a local model renders it with its own chat template (and `prompt`
        is ignored), a remote endpoint gets it as it is. `on_text` receives the text so far (it
        restarts on a fallback).
        """
        cancel = cancel or threading.Event()
        route = route or self.route(task, fast_mode)

        def work(model: Any, variant: str) -> EngineResult:
            if isinstance(model, RemoteModel):
                return self._generate_remote(model, prompt, messages, config, cancel, on_text)
            if messages is not None:
                ids = model.tokenizer.encode(render_chat(model.manifest.chat_template, messages))
            elif tokens is not None and tokens.tokenizer == model.tokenizer_id:
                ids = list(tokens.ids)
            else:
                ids = model.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
            return self._generate_on(model, variant, ids, config, cancel, on_text, pause)

        result, _, reason = self.router.run(route, work)
        result.fallback_reason = reason
        return result

    def _generate_on(
        self,
        model: Model,
        variant: str,
        ids: list[int],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
        pause: Callable[[], None] | None = None,
    ) -> EngineResult:
        ids, config = _healed(model, ids, config)
        mid = model.model_id
        self.metrics.count(mid, "requests")
        key = cache_key(mid, model.manifest.precision, ids, config.cache_key)
        hit = self.cache.get(key) if config.max_new_tokens > 0 else None
        if hit is not None:
            self.metrics.count(mid, "cache_hits")
            if on_text:
                on_text(hit["text"])
            return EngineResult(
                hit["text"],
                variant,
                mid,
                Finish(hit["finish"]),
                True,
                None,
                None,
                tuple(hit.get("logprobs", ())),
            )
        generation = Generation(model, ids, config, cancel, pause)
        text = ""
        try:
            for piece in generation:
                text += piece
                if on_text:
                    on_text(text)
        except Exception:
            self.metrics.count(mid, "errors")
            raise
        res = generation.result
        self._record(mid, res)
        if res.finish in CACHEABLE and config.max_new_tokens > 0:
            entry = {"text": res.text, "finish": res.finish.value, "logprobs": res.logprobs}
            self.cache.put(key, entry)
        return EngineResult(
            res.text, variant, mid, res.finish, False, None, res, tuple(res.logprobs)
        )

    def _generate_remote(
        self,
        model: RemoteModel,
        prompt: str | list[int],
        messages: list[dict[str, str]] | None,
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
    ) -> EngineResult:
        """A chat goes to `/chat/completions`; a prompt (a completion's, built by the context
        builder) to `/completions` as it is."""
        mid = model.model_id
        self.metrics.count(mid, "requests")
        if not isinstance(prompt, str):
            raise TypeError("a remote model takes a text prompt, not token ids")
        try:
            if messages is not None:
                res = model.generate(messages, config, cancel, on_text)
            else:
                res = model.complete(prompt, config, cancel, on_text)
        except Exception:
            self.metrics.count(mid, "errors")
            raise
        if res.finish is Finish.CANCELLED:
            self.metrics.count(mid, "cancels")
        self.metrics.record_generation(
            mid,
            prompt_tokens=0,
            reused_tokens=0,
            new_tokens=res.completion_tokens,
            ttft_s=res.ttft_s,
            tpot_s=None,
            total_s=res.total_s,
        )
        return EngineResult(res.text, REMOTE, mid, res.finish, False, None, None)

    def _record(self, model_id: str, res: GenerationResult) -> None:
        if res.finish is Finish.CANCELLED:
            self.metrics.count(model_id, "cancels")
        elif res.finish is Finish.DEADLINE:
            self.metrics.count(model_id, "timeouts")
        self.metrics.record_generation(
            model_id,
            prompt_tokens=res.prompt_tokens,
            reused_tokens=res.reused_tokens,
            new_tokens=res.new_tokens,
            ttft_s=res.ttft_s,
            tpot_s=res.tpot_s,
            total_s=res.total_s,
            drafted=res.drafted,
            accepted=res.accepted,
        )

    def warm(
        self,
        serving: ServingPlan,
        prompt: str,
        tokens: Tokens | None,
        cancel: threading.Event,
        heal: bool = False,
    ) -> int:
        """Prefill `prompt` into the KV cache of the model that serves first (idle time).
        `heal`: the request will heal it (GenerationConfig.heal): prefill what it will run, so
        that a FIM prompt's suffix, which follows the healed point, is cached too.

        Returns how many tokens were computed (0 when already cached). Not counted as a request.
        """
        model = serving.model
        if model is None:
            return 0
        if tokens is not None and tokens.tokenizer == model.tokenizer_id:
            ids = list(tokens.ids)
        else:
            ids = model.tokenizer.encode(prompt)
        ids, _ = _healed(model, ids, GenerationConfig(heal=heal))
        chunk = warm_chunk_tokens(self.prefill_s_per_token(model.model_id))
        config = GenerationConfig(max_new_tokens=0, prefill_chunk=chunk, persist=True)
        result = Generation(model, ids, config, cancel).run()
        computed = result.prompt_tokens - result.reused_tokens
        self.metrics.event("warmups")
        self.metrics.event("warmup_tokens", computed)
        return computed

    def likelihoods(
        self,
        serving: ServingPlan,
        prompt: str,
        tokens: Tokens | None,
        continuations: list[str],
        cancel: threading.Event,
    ) -> list[float | None]:
        """log P(continuation | prompt) for each, on the model that serves first (None each
        when no local model can say). Raises ScoringCancelled."""
        model = serving.model
        if model is None:
            return [None] * len(continuations)
        if tokens is not None and tokens.tokenizer == model.tokenizer_id:
            prompt_ids = list(tokens.ids)
        else:
            prompt_ids = model.tokenizer.encode(prompt)
        encoded = [model.tokenizer.encode(prompt + c) for c in continuations]
        context, rests = split_shared(prompt_ids, encoded)
        started = time.perf_counter()
        scores = [continuation_logprob(model, context, rest, cancel) for rest in rests]
        self.metrics.event("scored_candidates", len(continuations))
        self.metrics.event("scoring_ms", round((time.perf_counter() - started) * 1000))
        return scores

    def stats(self) -> dict[str, Any]:
        snap = self.metrics.snapshot()
        snap["breakers"] = self.router.states()
        snap["cache_problem"] = self.cache.problem
        snap["kv_cache_bytes"] = {
            v: m.pool.bytes_used() for v in (FAST, STANDARD) if (m := self.router.loaded(v))
        }
        snap["kv_cache_budget_bytes"] = self.config.pool.budget_bytes
        snap["kv_store"] = {v: store.stats() for v, store in self._stores()}
        remote = self.router.loaded(REMOTE)
        if remote is not None:
            usage = remote.usage
            snap["remote"] = {
                "model": remote.model_id,
                "day": usage.day,
                "tokens_today": usage.tokens,
                "daily_quota": remote.config.daily_token_quota,
                "requests": usage.requests,
                "failed_attempts": usage.failures,
            }
        return snap

    def _stores(self) -> list[tuple[str, Any]]:
        """(variant, KV store) of each loaded local model that has one."""
        pools = ((v, getattr(self.router.loaded(v), "pool", None)) for v in (FAST, STANDARD))
        return [(v, pool.store) for v, pool in pools if getattr(pool, "store", None)]

    def close(self) -> None:
        self.cache.close()
        for _, store in self._stores():
            store.close()
