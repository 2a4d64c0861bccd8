"""Per request, how it is served, decided once by `Engine.serving_plan` and carried on: the
route and the model that serves first, the prompt's ids by its tokenizer, what prefilling them
costs at the model's measured rate, and how the background prefill paces its chunks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inference.manifest import FimTemplate
from inference.model import Model
from inference.router import Route
from inference.tuning import T_WARM_CHUNK_MS, WARM_CHUNK_TOKENS


@dataclass(frozen=True)
class Tokens:
    """Prompt ids made by one tokenizer: reused by any model with that tokenizer (no re-encode)."""

    tokenizer: str  # Model.tokenizer_id
    ids: tuple[int, ...]


@dataclass(frozen=True)
class ServingPlan:
    """The engine's one answer, per request, to "which model, and how is its prompt made":
    the route of models in order, the loaded local model that serves it first (its tokenizer
    counts and encodes the prompt, its FIM template shapes it, its KV cache is warmed), and the
    FIM form of a remote that serves first. Decided once by `Engine.serving_plan`, carried on."""

    route: Route
    model: Model | None  # None: no local model loaded that can serve
    fim: FimTemplate | None
    prefill_s_per_token: float  # on `model`: measured, or PREFILL_S_PER_TOKEN before that

    def encode(self, prompt: str) -> Tokens | None:
        """`prompt`'s ids by the model that serves first (None: none, or nothing to encode)."""
        if self.model is None or not prompt.strip():
            return None
        return Tokens(self.model.tokenizer_id, tuple(self.model.tokenizer.encode(prompt)))

    def count_tokens(self) -> Callable[[str], int] | None:
        tokenizer = self.model.tokenizer if self.model is not None else None
        return (lambda s: len(tokenizer.encode(s, bos=False))) if tokenizer else None

    def prefill_estimate_s(self, tokens: Tokens) -> float:
        """How long prefilling the part of `tokens` no KV slot holds would take (0 when no
        model is loaded, or another tokenizer made them)."""
        model = self.model
        if model is None or tokens.tokenizer != model.tokenizer_id:
            return 0.0
        uncached = len(tokens.ids) - model.pool.cached_tokens(list(tokens.ids))
        return uncached * self.prefill_s_per_token


def warm_chunk_tokens(s_per_token: float) -> int:
    """The background prefill's chunk: about T_WARM_CHUNK_MS of work at this prefill rate."""
    least, most = WARM_CHUNK_TOKENS
    fits = int(T_WARM_CHUNK_MS / 1000 / max(s_per_token, 1e-6))
    return max(least, min(most, round(fits / least) * least))
