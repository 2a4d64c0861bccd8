"""A small generated GGUF with Qwen2.5-Coder's tokenizer layout, for tests that need no download.

The vocabulary is byte-level BPE (the 256 GPT-2 byte characters and a few merges, so that `def`
and ` return` are one token each), an ordinary `</s>` (Qwen's BPE vocabulary spells it as text
too), then Qwen2.5-Coder's 22 special tokens at the end, in the real file's order and with the
token types llama.cpp's converter gives them: control (3) for the `<|...|>` ones, user-defined (4)
for `<tool_call>` and `</tool_call>`; last, two unused (5) `[PAD...]` entries padding the
vocabulary, as the real file has. Only metadata is written: transformers reads a GGUF tokenizer
without its tensors.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from inference.manifest import FimTemplate

# Qwen2.5-Coder's added tokens, in id order (151643 to 151664 in the real vocabulary).
QWEN_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
USER_DEFINED = ("<tool_call>", "</tool_call>")
QWEN_FIM = FimTemplate(
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    pad="<|fim_pad|>",
    repo_name="<|repo_name|>",
    file_sep="<|file_sep|>",
)
FIM_TOKENS = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>")

# Merges in rank order; each one's result is also a vocabulary entry.
MERGES = (
    "d e",
    "de f",
    "Ġ r",
    "Ġr e",
    "Ġre t",
    "u r",
    "ur n",
    "Ġret urn",
    "< /",
    "</ s",
    "</s >",
)
PADDING = ("[PAD0]", "[PAD1]")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def byte_characters() -> list[str]:
    """GPT-2's byte-to-unicode table: the character standing for each byte, in its usual order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    codes = list(kept)
    moved = 0
    for byte in range(256):
        if byte not in kept:
            codes.append(256 + moved)
            moved += 1
    return [chr(c) for c in codes]


def qwen_vocabulary() -> list[str]:
    """Every token of the generated file, by id."""
    tokens = byte_characters()
    tokens += ["".join(m.split(" ")) for m in MERGES]
    return [*tokens, *QWEN_SPECIALS, *PADDING]


def write_qwen_gguf(path: Path, *, drop_fim_from_specials: bool = False) -> dict[str, int]:
    """Write the GGUF to `path`; returns the id of each of Qwen's special tokens.

    With `drop_fim_from_specials` the four `<|fim_*|>` tokens are ordinary (type 1) entries, as a
    badly converted file would have them: still in the vocabulary, at the same ids, but text.
    """
    tokens = qwen_vocabulary()
    assert len(set(tokens)) == len(tokens), "duplicate vocabulary entries"
    ids = {t: i for i, t in enumerate(tokens)}
    types = []
    for token in tokens:
        if token in USER_DEFINED:
            types.append(gguf.TokenType.USER_DEFINED)
        elif token in QWEN_SPECIALS and not (drop_fim_from_specials and token in FIM_TOKENS):
            types.append(gguf.TokenType.CONTROL)
        elif token in PADDING:
            types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.NORMAL)

    writer = gguf.GGUFWriter(path, "qwen2")  # writes general.architecture itself
    writer.add_name("qwen2.5-coder-test")
    writer.add_context_length(256)
    writer.add_embedding_length(8)
    writer.add_feed_forward_length(16)
    writer.add_block_count(1)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(list(MERGES))
    writer.add_eos_token_id(ids["<|im_end|>"])
    writer.add_bos_token_id(ids["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {t: ids[t] for t in QWEN_SPECIALS}
