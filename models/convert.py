"""Source weights -> a normalised FP32 Hugging Face directory plus the tokenizer facts we trust.

Needs the `build` extra. GGUF metadata is the authority on BOS/EOS: transformers' GGUF tokenizer
conversion gets them wrong for SmolLM2 (it claims BOS is added and EOS is <|im_start|>).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.manifest import FimTemplate
from models.source import Source, SourceError

SUPPORTED_FAMILIES = ("llama", "mistral", "qwen2")
# Tokens after which nothing more belongs in the same file: all end a completion.
END_MARKERS = (
    "<|endoftext|>",
    "<|im_end|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "</s>",
    "<file_sep>",
    "<|file_sep|>",
)
FIM_STYLES = (
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, StarCoder2
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder
    ("<PRE>", "<SUF>", "<MID>"),  # CodeLlama
)


@dataclass
class TokenizerFacts:
    eos_token_ids: list[int]
    bos_policy: str  # "never" or "always"
    bos_token_id: int | None
    fim: FimTemplate | None
    chat_template: str | None = None


@dataclass
class Converted:
    hf_dir: Path
    config: dict[str, Any]
    facts: TokenizerFacts


# What the hf folder's tokenizer_config.json names: every reader then takes tokenizer.json as is.
PINNED_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
# The generic class would also hand out token_type_ids, which generate() refuses for Llama
# (`transformers serve` failed on every request).
PINNED_INPUTS = ["input_ids", "attention_mask"]


def _gguf_metadata(path: Path) -> dict[str, Any]:
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except Exception as exc:  # the reader raises assorted errors on damaged files
        raise SourceError(f"{path}: corrupt GGUF file ({type(exc).__name__}: {exc})") from exc
    skip = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"}
    return {k: f.contents() for k, f in reader.fields.items() if k not in skip}


def check_family(family: str, where: Path) -> None:
    if family not in SUPPORTED_FAMILIES:
        raise SourceError(
            f"{where}: architecture {family!r} is not supported "
            f"(Llama-family causal LMs only: {', '.join(SUPPORTED_FAMILIES)})"
        )


def _facts(
    tokenizer: Any, eos_ids: set[int], bos_policy: str, bos_id: int | None
) -> TokenizerFacts:
    vocab = tokenizer.get_vocab()
    eos_ids |= {vocab[t] for t in END_MARKERS if t in vocab}
    fim = next(
        (FimTemplate(*style) for style in FIM_STYLES if all(t in vocab for t in style)), None
    )
    template = getattr(tokenizer, "chat_template", None)
    return TokenizerFacts(
        sorted(eos_ids),
        bos_policy,
        bos_id if bos_policy == "always" else None,
        fim,
        template if isinstance(template, str) else None,
    )


def _save_tokenizer(tokenizer: Any, facts: TokenizerFacts, out: Path) -> None:
    """Save a tokenizer whose own special-token settings agree with the facts."""
    if hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = facts.bos_policy == "always"
    if facts.eos_token_ids:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(facts.eos_token_ids[-1])
    tokenizer.save_pretrained(out)
    _pin_tokenizer_json(out)


def _pin_tokenizer_json(out: Path) -> None:
    """Make tokenizer.json, as written, the whole tokenizer for every reader of the folder.

    A GGUF-converted tokenizer is saved as "LlamaTokenizer" even when its vocabulary is
    byte-level BPE (SmolLM2): transformers 4 reads tokenizer.json as it is for that class, but
    transformers 5 (and so vLLM) rebuilds a SentencePiece-style pipeline around its vocabulary
    and merges: other ids, and text decoded as `deff(x):returnx`. The generic class reads
    tokenizer.json verbatim everywhere, as inference/tokenizer.py does.
    """
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = PINNED_TOKENIZER_CLASS
    config["clean_up_tokenization_spaces"] = False  # else transformers 4 turns "a , b" into "a, b"
    config["model_input_names"] = PINNED_INPUTS
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    # transformers 4 saves the GGUF file it read the vocabulary from as "tokenizer.model".
    spm = out / "tokenizer.model"
    if spm.is_file():
        with spm.open("rb") as handle:
            if handle.read(4) == b"GGUF":
                spm.unlink()


def gguf_tokenizer(source: Source) -> tuple[Any, TokenizerFacts]:
    """The tokenizer inside a GGUF file, with BOS/EOS facts from the GGUF metadata."""
    from transformers import AutoTokenizer

    meta = _gguf_metadata(source.path)
    check_family(str(meta.get("general.architecture", "unknown")), source.path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path.parent, gguf_file=source.path.name)
    except (ValueError, KeyError, OSError) as exc:
        raise SourceError(f"{source.path}: transformers cannot load it ({exc})") from exc
    eos = meta.get("tokenizer.ggml.eos_token_id")
    bos = meta.get("tokenizer.ggml.bos_token_id")
    # llama.cpp adds BOS by default for SentencePiece ("llama") vocabularies when the key is absent.
    default_bos = meta.get("tokenizer.ggml.model") == "llama"
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", default_bos))
    facts = _facts(
        tokenizer,
        {int(eos)} if eos is not None else set(),
        "always" if add_bos else "never",
        int(bos) if bos is not None else None,
    )
    # The GGUF's own template is the authority; transformers copies it, when it reads it at all.
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str) and template:
        facts.chat_template = template
    return tokenizer, facts


def convert_gguf(source: Source, out: Path) -> Converted:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer, facts = gguf_tokenizer(source)
    folder, name = source.path.parent, source.path.name
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except (ValueError, KeyError, OSError) as exc:
        raise SourceError(f"{source.path}: transformers cannot load it ({exc})") from exc
    return save_converted(model, tokenizer, facts, out)


def convert_hf(source: Source, out: Path) -> Converted:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(source.path)
    check_family(config.model_type, source.path)
    tokenizer = AutoTokenizer.from_pretrained(source.path)
    model = AutoModelForCausalLM.from_pretrained(source.path, dtype=torch.float32)
    eos = config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    # Ask the tokenizer itself: a generic fast tokenizer adds BOS in its post-processor only.
    probe = tokenizer("a")["input_ids"]
    add_bos = tokenizer.bos_token_id is not None and probe[:1] == [tokenizer.bos_token_id]
    facts = _facts(tokenizer, eos_ids, "always" if add_bos else "never", tokenizer.bos_token_id)
    return save_converted(model, tokenizer, facts, out)


def save_converted(model: Any, tokenizer: Any, facts: TokenizerFacts, out: Path) -> Converted:
    model.save_pretrained(out, safe_serialization=True, max_shard_size="100GB")
    _save_tokenizer(tokenizer, facts, out)
    config = json.loads((out / "config.json").read_text())
    return Converted(out, config, facts)


def convert(source: Source, out: Path) -> Converted:
    return convert_gguf(source, out) if source.kind == "gguf" else convert_hf(source, out)
