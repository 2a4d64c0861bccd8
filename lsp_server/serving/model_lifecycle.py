"""The engine and its models: made from the settings, the fast model loaded in the background at
start, the standard one then or on first use; model work runs on threads of its own, never on
the event loop."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inference.engine import Engine, EngineConfig
from inference.errors import ModelLoadError
from inference.kv_cache import PoolConfig
from inference.router import FAST, STANDARD
from lsp_server.config.settings import Settings, remote_config
from lsp_server.serving.notices import Notices
from models.choice import selected_model

log = logging.getLogger(__name__)

Progress = Callable[[str, int | None], None]  # (message, percentage; None: done)
EngineFactory = Callable[[Settings], Engine]


def engine_for(settings: Settings, config: EngineConfig | None = None) -> Engine:
    """The engine the settings ask for (`config`, when given, instead: tests and benchmarks)."""
    if config is not None:
        return Engine(config)
    fast, standard = settings.fastModelPath, settings.standardModelPath
    return Engine(
        EngineConfig(
            # The machine's default is asked for (a device probe) only when a folder is not set.
            model_name=None if fast and standard else selected_model(),
            fast_dir=Path(fast).expanduser() if fast else None,
            standard_dir=Path(standard).expanduser() if standard else None,
            remote=remote_config(settings.remote),
            verify_hashes=True,  # a corrupt model is caught while loading, not mid-request
            pool=PoolConfig(budget_bytes=settings.kvCacheMB << 20),
            completions_load_models=False,  # never a model load inside a keystroke's request
        )
    )


class ModelLifecycle:
    def __init__(
        self, notices: Notices, settings: Callable[[], Settings], make_engine: EngineFactory
    ) -> None:
        self.engine: Engine | None = None
        self.ready = threading.Event()  # set once a first model can serve
        self._notices = notices
        self._settings = settings
        self._make_engine = make_engine
        # Model work: completions, warm-ups and one chat task can run side by side.
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="model")
        self._loading: dict[str, asyncio.Future] = {}  # a model being loaded on first use

    @property
    def serving(self) -> bool:
        return self.engine is not None and self.ready.is_set()

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` on a model thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def remote_completes(self) -> bool:
        """A team's server answers completions when fast mode is off (the fast model behind it)."""
        remote = remote_config(self._settings().remote)
        return remote is not None and remote.completions

    def standard_now(self) -> bool:
        """Whether the standard model loads at start-up rather than on first use."""
        settings = self._settings()
        return settings.preloadStandard or not (settings.fastMode or self.remote_completes())

    def wants_standard(self) -> bool:
        """Fast mode just went off: the standard model is wanted unless a remote answers."""
        return self.ready.is_set() and not self.remote_completes()

    async def load(
        self,
        progress: Progress | None = None,
        observer: Any = None,
        on_ready: Callable[[], None] = lambda: None,
    ) -> None:
        """Load the fast model in the background, and the standard one after it when it is
        wanted now (preloadStandard, fast mode off, or no fast model); completions are served
        from the first one ready (`on_ready` then). Otherwise the standard model loads on first
        use."""
        notices = self._notices
        notices.set_state("loading", "loading models")
        self.engine = engine = self._make_engine(self._settings())
        if observer is not None:
            engine.metrics.add_observer(observer)
        if engine.cache.problem:
            notices.tell_once(f"fastcomplete: {engine.cache.problem}")
        missing = []
        for i, variant in enumerate((FAST, STANDARD)):
            if variant == STANDARD and not missing and not self.standard_now():
                log.info("the standard model loads on first use")
                break
            try:
                await self.run(engine.load, variant)
                if not self.ready.is_set():
                    self.ready.set()
                    notices.set_state("ready", f"{variant} model ready")
                    on_ready()
            except ModelLoadError as exc:
                missing.append(f"{variant} model: {exc}")
            if progress:
                progress(f"{variant} ready", 50 * i + 50)
        if progress:
            progress("models loaded", None)
        if not self.ready.is_set():
            # One message, not one per model: the editor shows each as its own error.
            problems = "; ".join(missing) or "no model could be loaded"
            settings = self._settings()
            offered = settings.offersModelBuild and not (
                settings.fastModelPath or settings.standardModelPath
            )
            if not (offered and all("models build" in m for m in missing)):
                notices.tell_once(
                    f"fastcomplete: no completions, no model could be loaded: {problems}", "error"
                )
            notices.set_state("error", problems)
        else:
            for problem in missing:
                notices.tell_once(f"fastcomplete: {problem}", "error")

    async def ensure_loaded(self, variant: str) -> bool:
        """Load `variant` now unless it is loaded (once, however many ask); False when it
        cannot be (the user is told once). Requests meanwhile are served by the loaded model."""
        if self.engine is None or self.engine.router.loaded(variant) is not None:
            return self.engine is not None
        if variant not in self._loading:
            self._loading[variant] = asyncio.ensure_future(self._load_on_first_use(variant))
        return await asyncio.shield(self._loading[variant])

    async def _load_on_first_use(self, variant: str) -> bool:
        assert self.engine is not None
        # The status bar says so: a person who just switched models sees why the next
        # suggestions still come from the model already loaded.
        self._notices.set_state("loading", f"loading the {variant} model (first use)")
        try:
            await self.run(self.engine.load, variant)
            self._notices.set_state("ready", f"{variant} model ready")
            return True
        except ModelLoadError as exc:
            self._notices.set_state("ready", f"{variant} model unavailable")
            self._notices.tell_once(f"fastcomplete: {variant} model: {exc}", "error")
            return False
        finally:
            self._loading.pop(variant, None)
