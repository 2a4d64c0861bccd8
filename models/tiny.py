"""A tiny randomly initialised Llama with the real tokenizer: builds in seconds, for fast tests."""

from __future__ import annotations

from pathlib import Path

from models.convert import Converted, gguf_tokenizer, save_converted
from models.source import Source

TINY_NAME = "tiny-llama"
TINY_SEED = 1234


def make_tiny(tokenizer_source: Source, out: Path) -> Converted:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer, facts = gguf_tokenizer(tokenizer_source)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        # The usual 0.02 init keeps the residual stream close to the tied embedding, so top-1 choices
        # are decisive and the build's fast-vs-standard agreement check passes on random weights
        # (wider inits measured 0.93 at 0.1 and 0.80 at 0.5).
        initializer_range=0.02,
        bos_token_id=facts.bos_token_id,
        eos_token_id=facts.eos_token_ids[-1] if facts.eos_token_ids else None,
    )
    torch.manual_seed(TINY_SEED)
    model = LlamaForCausalLM(config).eval()
    return save_converted(model, tokenizer, facts, out)
