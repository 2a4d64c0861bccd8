"""Choosing the next token from logits: greedy, or temperature + top-p with a seeded generator."""

from __future__ import annotations

import numpy as np


def greedy(logits: np.ndarray) -> int:
    return int(np.argmax(logits))


def sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    if temperature <= 0.0:
        return greedy(logits)
    scaled = logits.astype(np.float64) / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs)
        cumulative = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cumulative, top_p)) + 1]
        mask = np.zeros_like(probs)
        mask[keep] = probs[keep]
        probs = mask / mask.sum()
    return int(rng.choice(len(probs), p=probs))


def apply_allowed(logits: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Restrict the choice to `allowed` token ids (token healing); None allows everything."""
    if allowed is None:
        return logits
    out = np.full_like(logits, -np.inf)
    out[allowed] = logits[allowed]
    return out
