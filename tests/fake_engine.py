"""A scripted engine for tests of the server's policy without ONNX or a built model.

It is the real Engine (routing, fallback, circuit breakers, planning, metrics) over fake models:
a character-level tokenizer, a KV pool that remembers prefilled prompts, and a "generation" that
replays what a script says for the prompt, one character per token, honouring the stop rules,
the token limit and the cancel flag between tokens as the real decode loop does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from inference.engine import Engine, EngineConfig, EngineResult
from inference.errors import ModelFailure, NoModel
from inference.generate import Finish, GenerationConfig, GenerationResult
from inference.model import Model
from inference.router import FAST, STANDARD
from inference.serving import ServingPlan, Tokens
from lsp_server.config.settings import Settings

Script = Callable[[str, str], str]  # (variant, prompt) -> what that model "generates" there


class FakeTokenizer:
    """One token per character; counts what it encodes (the tests of one encode per request)."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        self.encoded.append(text)
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)

    def special_id(self, text: str) -> int | None:
        return None


class FakePool:
    """The prompts whose KV a real pool would hold."""

    def __init__(self) -> None:
        self.prompts: list[tuple[int, ...]] = []

    def cached_tokens(self, prompt: list[int]) -> int:
        def common(held: tuple[int, ...]) -> int:
            n = 0
            for a, b in zip(held, prompt, strict=False):
                if a != b:
                    break
                n += 1
            return n

        return max((common(p) for p in self.prompts), default=0)

    def keep(self, ids: list[int]) -> None:
        self.prompts = [*self.prompts[-7:], tuple(ids)]

    def bytes_used(self) -> int:
        return 0

    def clear(self) -> None:
        self.prompts.clear()


def fake_model(variant: str) -> Model:
    manifest = SimpleNamespace(
        fim=None, precision="fake", files={}, eos_token_ids=[], chat_template=None
    )
    return Model("fake", variant, manifest, None, FakePool(), FakeTokenizer())  # type: ignore[arg-type]


@dataclass
class Call:
    variant: str
    prompt: str
    config: GenerationConfig


class FakeEngine(Engine):
    """`script` answers each generation; `s_per_token` is each decoded token's time and
    `prefill_s_per_token` each uncached prompt token's (both waited out on the cancel flag);
    `failing` variants raise ModelFailure; `missing` ones cannot be loaded."""

    def __init__(
        self,
        script: Script = lambda variant, prompt: "x",
        *,
        s_per_token: float = 0.0,
        prefill_s_per_token: float = 0.0,
        failing: frozenset[str] = frozenset(),
        missing: frozenset[str] = frozenset(),
    ) -> None:
        self.script = script
        self.s_per_token = s_per_token
        self.prefill_rate = prefill_s_per_token
        self.failing = set(failing)
        self.calls: list[Call] = []
        self.warmed: list[str] = []

        def loader(variant: str) -> Callable[[], Model]:
            def load() -> Model:
                if variant in missing:
                    raise NoModel(f"{variant}: not built (scripted)")
                return fake_model(variant)

            return load

        config = EngineConfig(
            fast_dir=Path("/nonexistent/fast"),
            standard_dir=Path("/nonexistent/standard"),
            cache_dir=None,
            cache_memory_items=0,
            completions_load_models=False,
        )
        super().__init__(config, {v: loader(v) for v in (FAST, STANDARD)})

    def prefill_s_per_token(self, model_id: str) -> float:
        return self.prefill_rate or super().prefill_s_per_token(model_id)

    def _prefill(self, model: Model, ids: list[int], cancel: threading.Event) -> tuple[int, float]:
        """Wait as long as prefilling the uncached part would take; (reused, seconds)."""
        reused = model.pool.cached_tokens(ids)
        seconds = (len(ids) - reused) * self.prefill_rate
        if seconds and cancel.wait(seconds):
            return reused, seconds
        model.pool.keep(ids)
        return reused, seconds

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
        if variant in self.failing:
            raise ModelFailure(f"{variant} fails (scripted)")
        prompt = model.tokenizer.decode(ids)
        self.calls.append(Call(variant, prompt, config))
        started = time.perf_counter()
        reused, prefill_s = self._prefill(model, ids, cancel)
        text, finish = "", Finish.EOS
        for ch in config.constraint + self.script(variant, prompt):
            if cancel.is_set():
                finish = Finish.CANCELLED
                break
            if ch == "\n" and config.stop_at_newline and (text or not config.next_line):
                finish = Finish.NEWLINE
                break
            if len(text) >= config.max_new_tokens:
                finish = Finish.LENGTH
                break
            if self.s_per_token and cancel.wait(self.s_per_token):
                finish = Finish.CANCELLED
                break
            text += ch
            if on_text and len(text) > len(config.constraint):
                on_text(text[len(config.constraint) :])  # as the decode loop: after the constraint
        text = text.removeprefix(config.constraint)
        res = GenerationResult(
            text=text,
            token_ids=[ord(c) for c in text],
            finish=finish,
            prompt_tokens=len(ids),
            reused_tokens=reused,
            prefill_s=prefill_s,
            ttft_s=time.perf_counter() - started,
            total_s=time.perf_counter() - started,
        )
        self._record(model.model_id, res)
        return EngineResult(text, variant, model.model_id, finish, False, None, res)

    def warm(
        self,
        serving: ServingPlan,
        prompt: str,
        tokens: Tokens | None,
        cancel: threading.Event,
        heal: bool = False,
    ) -> int:
        model = serving.model
        if model is None:
            return 0
        ids = list(tokens.ids) if tokens is not None else model.tokenizer.encode(prompt)
        reused, _ = self._prefill(model, ids, cancel)
        if not cancel.is_set():
            self.warmed.append(prompt)
        return len(ids) - reused

    def likelihoods(
        self,
        serving: ServingPlan,
        prompt: str,
        tokens: Tokens | None,
        continuations: list[str],
        cancel: threading.Event,
    ) -> list[float | None]:
        return [None] * len(continuations)


def engine_factory(engine: FakeEngine) -> Callable[[Settings], Engine]:
    """A CompletionService's `make_engine` that hands it `engine`."""

    def make(settings: Settings) -> Engine:
        return engine

    return make
