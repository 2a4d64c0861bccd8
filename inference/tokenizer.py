"""Text <-> token ids with the BOS policy from the model's manifest (never transformers' defaults)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

from inference.vocab_index import VocabIndex


class Tokenizer:
    def __init__(self, path: Path, bos_token_id: int | None = None) -> None:
        self._tok = HFTokenizer.from_file(str(path))
        self.bos_token_id = bos_token_id  # None: the model was trained without a BOS (SmolLM2)

    def encode(self, text: str, *, bos: bool = True) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        if bos and self.bos_token_id is not None:
            return [self.bos_token_id, *ids]
        return ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=True)

    def token_text(self, token_id: int) -> str:
        """The decoded text of one token alone (byte-level tokens may be partial UTF-8)."""
        return self._tok.decode([token_id], skip_special_tokens=False)

    def special_id(self, text: str) -> int | None:
        """The id of an added special token spelled `text` (None: it is not one)."""
        return self._specials.get(text)

    @cached_property
    def _specials(self) -> dict[str, int]:
        return {t.content: i for i, t in self._tok.get_added_tokens_decoder().items() if t.special}

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def vocab_texts(self) -> list[str]:
        """Every token's decoded text, by id: used to constrain generation (token healing)."""
        return [self.token_text(i) for i in range(self.vocab_size)]

    @cached_property
    def vocab_index(self) -> VocabIndex:
        return VocabIndex(self)
