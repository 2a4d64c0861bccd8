"""The engine the server and CLI talk to: route -> cache -> generate -> metrics.

Synchronous by design: callers run it on a worker thread and stop it with the cancel flag.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from inference.completion_cache import CompletionCache, cache_key
from inference.generate import Finish, Generation, GenerationConfig, GenerationResult
from inference.healing import heal
from inference.kv_cache import PoolConfig
from inference.metrics import Metrics
from inference.model import Model, ModelLoadError, load_model_dir
from inference.remote import RemoteConfig, RemoteModel
from inference.router import FAST, REMOTE, STANDARD, NoModel, Router, Task
from inference.session import SessionConfig
from models.paths import DEFAULT_MODEL, fastcomplete_home, variant_dir

WARM_CHUNK = 64  # a keystroke arriving mid-warm-up waits for at most one such chunk
CACHEABLE = frozenset({Finish.EOS, Finish.STOP, Finish.NEWLINE, Finish.LENGTH})


@dataclass(frozen=True)
class EngineConfig:
    model_name: str = field(
        default_factory=lambda: os.environ.get("FASTCOMPLETE_MODEL", DEFAULT_MODEL)
    )
    fast_dir: Path | None = None  # explicit model folders override the name
    standard_dir: Path | None = None
    session: SessionConfig = SessionConfig()
    pool: PoolConfig = PoolConfig()
    cache_dir: Path | None = field(default_factory=lambda: fastcomplete_home() / "cache")
    cache_bytes: int = 64 << 20
    cache_memory_items: int = 512  # 0: no in-memory layer (benchmarks that must not hit it)
    breaker_threshold: int = 3
    breaker_cooldown_s: float = 30.0
    remote: RemoteConfig | None = None  # an OpenAI-compatible server in front of `standard`
    verify_hashes: bool = False  # sha256 of every model file at load time


@dataclass
class EngineResult:
    text: str
    variant: str
    model_id: str
    finish: Finish
    cached: bool
    fallback: bool
    generation: GenerationResult | None  # None for cache hits


def _loader(directory: Path, config: EngineConfig) -> Callable[[], Model]:
    def load() -> Model:
        if not directory.exists():
            raise NoModel(f"not built: {directory} (run `fastcomplete models build`)")
        return load_model_dir(directory, config.session, config.pool, config.verify_hashes)

    return load


class Engine:
    def __init__(self, config: EngineConfig = EngineConfig()) -> None:
        self.config = config
        self.metrics = Metrics()
        dirs = {
            FAST: config.fast_dir or variant_dir(config.model_name, FAST),
            STANDARD: config.standard_dir or variant_dir(config.model_name, STANDARD),
        }
        self.model_dirs = dirs
        loaders: dict[str, Callable[[], Any]] = {v: _loader(d, config) for v, d in dirs.items()}
        if config.remote is not None:
            remote = RemoteModel(config.remote)
            loaders[REMOTE] = lambda: remote
        self.router: Router[Any] = Router(
            loaders,
            self.metrics,
            config.breaker_threshold,
            config.breaker_cooldown_s,
            remote_completions=bool(config.remote and config.remote.completions),
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

    def completion_model(self, fast_mode: bool = True) -> Model | None:
        """The loaded model that would serve a completion, for its tokenizer and FIM template."""
        for variant in (FAST, STANDARD) if fast_mode else (STANDARD, FAST):
            model = self.router.loaded(variant)
            if model is not None:
                return model
        return None

    def generate(
        self,
        task: Task,
        prompt: str | list[int],
        config: GenerationConfig = GenerationConfig(),
        *,
        fast_mode: bool = True,
        cancel: threading.Event | None = None,
        on_text: Callable[[str], None] | None = None,
        pause: Callable[[], None] | None = None,
        messages: list[dict[str, str]] | None = None,
    ) -> EngineResult:
        """Run one request. `on_text` receives the text so far (it restarts on a fallback).

        `messages` is the chat form of `prompt`, for a remote endpoint's chat API.
        """
        cancel = cancel or threading.Event()

        def work(model: Any, variant: str) -> EngineResult:
            if isinstance(model, RemoteModel):
                chat = messages or [{"role": "user", "content": str(prompt)}]
                return self._generate_remote(model, chat, config, cancel, on_text)
            return self._generate_on(model, variant, prompt, config, cancel, on_text, pause)

        result, _, fallback = self.router.run(task, fast_mode, work)
        result.fallback = fallback
        return result

    def _generate_on(
        self,
        model: Model,
        variant: str,
        prompt: str | list[int],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
        pause: Callable[[], None] | None = None,
    ) -> EngineResult:
        ids = model.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if config.heal and not config.constraint:
            healed = heal(ids, model.tokenizer)
            ids, config = healed.ids, replace(config, constraint=healed.prefix)
        mid = model.model_id
        self.metrics.count(mid, "requests")
        key = cache_key(mid, model.manifest.precision, ids, config.cache_key)
        hit = self.cache.get(key) if config.max_new_tokens > 0 else None
        if hit is not None:
            self.metrics.count(mid, "cache_hits")
            if on_text:
                on_text(hit["text"])
            return EngineResult(hit["text"], variant, mid, Finish(hit["finish"]), True, False, None)
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
            self.cache.put(key, {"text": res.text, "finish": res.finish.value})
        return EngineResult(res.text, variant, mid, res.finish, False, False, res)

    def _generate_remote(
        self,
        model: RemoteModel,
        chat: list[dict[str, str]],
        config: GenerationConfig,
        cancel: threading.Event,
        on_text: Callable[[str], None] | None,
    ) -> EngineResult:
        mid = model.model_id
        self.metrics.count(mid, "requests")
        try:
            res = model.generate(chat, config, cancel, on_text)
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
        return EngineResult(res.text, REMOTE, mid, res.finish, False, False, None)

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

    def warm(self, prompt: str, *, fast_mode: bool, cancel: threading.Event) -> int:
        """Prefill `prompt` into the KV cache of the model that would complete there (idle time).

        Returns how many tokens were computed (0 when already cached). Not counted as a request.
        """
        model = self.completion_model(fast_mode)
        if model is None:
            return 0
        config = GenerationConfig(max_new_tokens=0, prefill_chunk=WARM_CHUNK)
        gen = Generation(model, model.tokenizer.encode(prompt), config, cancel)
        result = gen.run()
        computed = result.prompt_tokens - result.reused_tokens
        self.metrics.event("warmups")
        self.metrics.event("warmup_tokens", computed)
        return computed

    def stats(self) -> dict[str, Any]:
        snap = self.metrics.snapshot()
        snap["breakers"] = self.router.states()
        snap["cache_problem"] = self.cache.problem
        snap["kv_cache_bytes"] = {
            v: m.pool.bytes_used() for v in (FAST, STANDARD) if (m := self.router.loaded(v))
        }
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

    def close(self) -> None:
        self.cache.close()
