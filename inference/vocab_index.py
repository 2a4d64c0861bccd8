"""The vocabulary indexed by token text, for constraining generation to a spelling (token
healing, inference/healing.py; the names' bonus, inference/names.py). Built from any vocabulary,
the tokenizer's included, and imports none of them."""

from __future__ import annotations

from bisect import bisect_left
from functools import cached_property
from typing import Protocol

import numpy as np


class Vocabulary(Protocol):
    def vocab_texts(self) -> list[str]:
        """Every token's decoded text, by id."""
        ...


class VocabIndex:
    """Token texts sorted for prefix queries; built once per tokenizer (~50 ms for 49k tokens)."""

    def __init__(self, tokenizer: Vocabulary) -> None:
        texts = tokenizer.vocab_texts()
        order = sorted(range(len(texts)), key=texts.__getitem__)
        self.sorted_texts = [texts[i] for i in order]
        self.sorted_ids = np.asarray(order, dtype=np.int64)
        self.texts = texts

    @cached_property
    def word_enders(self) -> np.ndarray:
        """Tokens that end an identifier: their text starts with a character none continues."""
        ends = [i for i, t in enumerate(self.texts) if t and not (t[0].isalnum() or t[0] == "_")]
        return np.asarray(ends, dtype=np.int64)

    @cached_property
    def word_lengths(self) -> np.ndarray:
        """How many identifier characters each token's text starts with."""
        lengths = np.zeros(len(self.texts), dtype=np.int64)
        for i, text in enumerate(self.texts):
            n = 0
            while n < len(text) and (text[n].isalnum() or text[n] == "_"):
                n += 1
            lengths[i] = n
        return lengths

    def starting_with(self, prefix: str) -> np.ndarray:
        lo = bisect_left(self.sorted_texts, prefix)
        hi = bisect_left(self.sorted_texts, prefix + "\U0010ffff")
        return self.sorted_ids[lo:hi]

    def allowed(self, remaining: str) -> np.ndarray:
        """Tokens that continue `remaining`: they extend it, or are a non-empty prefix of it."""
        prefixes = [i for k in range(1, len(remaining)) for i in self._exact(remaining[:k])]
        return np.unique(
            np.concatenate([self.starting_with(remaining), np.asarray(prefixes, dtype=np.int64)])
        )

    def _exact(self, text: str) -> list[int]:
        lo = bisect_left(self.sorted_texts, text)
        out = []
        while lo < len(self.sorted_texts) and self.sorted_texts[lo] == text:
            out.append(int(self.sorted_ids[lo]))
            lo += 1
        return out
