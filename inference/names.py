"""Names that exist: while the output still spells the identifier the cursor is in, tokens that
keep it on a name the repository, the file or the language knows get a bonus.

A small model invents plausible names (`get_user_info` where the code has `get_user`); the server
knows the real ones. `rests` holds what each known name still needs after the identifier typed so
far ("" when that identifier is a name itself). Once the output leaves the identifier, or spells
something no known name starts with (a new name being made up on purpose), the model is free.
"""

from __future__ import annotations

import numpy as np

from inference.vocab_index import VocabIndex


def is_word(text: str) -> bool:
    """Only identifier characters (an empty text too)."""
    return all(c.isalnum() or c == "_" for c in text)


def name_tokens(
    index: VocabIndex, constraint: str, done: str, rests: tuple[str, ...]
) -> np.ndarray | None:
    """Token ids that keep the output on a known name, or None when no name applies.
    `constraint`: text the output must start with (token healing); `done`: the output so far."""
    if len(done) < len(constraint):
        targets = {constraint[len(done) :] + rest for rest in rests}
    else:
        extra = done[len(constraint) :]
        if not is_word(extra):
            return None  # the identifier has ended
        targets = {rest[len(extra) :] for rest in rests if rest.startswith(extra)}
    if not targets:
        return None
    parts = [_spelling(index, target) for target in targets if target]
    if "" in targets:
        parts.append(index.word_enders)
    return np.concatenate(parts)  # repeated ids are boosted once (numpy's fancy assignment)


def _spelling(index: VocabIndex, target: str) -> np.ndarray:
    """Tokens that spell on along `target`: a part of it, all of it, or all of it and then a
    character that ends the identifier (not `target` + more letters: a name nobody has)."""
    ids = index.allowed(target)
    return ids[index.word_lengths[ids] <= len(target)]


def boost(logits: np.ndarray, ids: np.ndarray, bonus: float) -> np.ndarray:
    out = np.array(logits, dtype=np.float32, copy=True)
    out[ids] += bonus
    return out
