"""A built tokenizer must keep the model's special tokens whole: each FIM, stop and chat-template
token encodes to exactly one id, and every stop id is a token of the vocabulary.

A special token split into text (`<|fim_prefix|>` as `<`, `|`, `f`, ...) makes a FIM model write
garbage and lets the token's spelling reach the editor; a stop id outside the vocabulary never
stops anything.
"""

from __future__ import annotations

import re
from pathlib import Path

from inference.manifest import FimTemplate

# Special-token spellings in a chat template: `<|im_start|>`, `<s>`, `[INST]` is left to the
# template itself (it is text for Llama 2 tokenizers too).
TEMPLATE_TOKEN = re.compile(r"<\|?[A-Za-z0-9_]+\|?>|</s>")


def tokenizer_problems(
    tokenizer_json: Path,
    *,
    eos_token_ids: list[int],
    fim: FimTemplate | None,
    chat_template: str | None,
    vocab_size: int,
) -> list[str]:
    """One line per problem; empty when the tokenizer keeps every token it must."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    problems = []
    must = {}
    for token_id in eos_token_ids:
        text = tokenizer.id_to_token(token_id) if 0 <= token_id < vocab_size else None
        if not 0 <= token_id < vocab_size:
            problems.append(f"stop id {token_id} is outside the vocabulary (size {vocab_size})")
        elif text is None:
            problems.append(f"stop id {token_id} has no token in {tokenizer_json.name}")
        else:
            must[text] = f"stop token {text!r}"
    for text in fim.tokens() if fim else ():
        must[text] = f"FIM token {text!r}"
    # Only added tokens: Qwen's ordinary BPE vocabulary also spells `</s>` as plain text.
    added = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    for text in TEMPLATE_TOKEN.findall(chat_template or ""):
        if text in added:
            must.setdefault(text, f"chat-template token {text!r}")
    for text, what in must.items():
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) != 1:
            problems.append(f"{what} encodes to {len(ids)} ids {ids[:8]}, not one")
    return problems
