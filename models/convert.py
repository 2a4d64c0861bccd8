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
# Qwen2.5-Coder's repository-level format and FIM padding, recorded beside its FIM template.
FIM_EXTRAS = {"pad": "<|fim_pad|>", "repo_name": "<|repo_name|>", "file_sep": "<|file_sep|>"}
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


# GGUF token types (llama.cpp's llama_token_type) that are not text: they must stay one token.
GGUF_CONTROL = 3
GGUF_USER_DEFINED = 4


def _gguf_read(path: Path) -> tuple[dict[str, Any], dict[int, str]]:
    """The GGUF's metadata, and its control and user-defined tokens by id."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except Exception as exc:  # the reader raises assorted errors on damaged files
        raise SourceError(f"{path}: corrupt GGUF file ({type(exc).__name__}: {exc})") from exc
    skip = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"}
    meta = {k: f.contents() for k, f in reader.fields.items() if k not in skip}
    specials: dict[int, str] = {}
    tokens, types = (
        reader.fields.get("tokenizer.ggml.tokens"),
        reader.fields.get("tokenizer.ggml.token_type"),
    )
    if tokens is not None and types is not None:
        for token_id, (t, k) in enumerate(zip(tokens.data, types.data, strict=False)):
            if int(types.parts[k][0]) in (GGUF_CONTROL, GGUF_USER_DEFINED):
                specials[token_id] = bytes(tokens.parts[t]).decode("utf-8", "replace")
    return meta, specials


def _keep_special_tokens(tokenizer: Any, specials: dict[int, str], where: Path) -> None:
    """Make every control and user-defined token of the GGUF an added special token.

    transformers' GGUF conversion adds only the tokens it knows the role of (Qwen2.5-Coder: 3 of
    22), so `<|fim_prefix|>` would be split into seven pieces of text.
    """
    from tokenizers import AddedToken

    vocab = tokenizer.get_vocab()
    wrong = {t: vocab.get(t) for i, t in specials.items() if vocab.get(t) not in (None, i)}
    if wrong:
        raise SourceError(f"{where}: special tokens at other ids than the GGUF says: {wrong}")
    added = [AddedToken(t, special=True, normalized=False) for _, t in sorted(specials.items())]
    tokenizer.add_special_tokens(
        {"additional_special_tokens": added}, replace_additional_special_tokens=False
    )
    moved = {t: i for i, t in specials.items() if tokenizer.convert_tokens_to_ids(t) != i}
    if moved:
        raise SourceError(f"{where}: special tokens got new ids when added: {moved}")


def check_family(family: str, where: Path) -> None:
    if family not in SUPPORTED_FAMILIES:
        raise SourceError(
            f"{where}: architecture {family!r} is not supported "
            f"(Llama-family causal LMs only: {', '.join(SUPPORTED_FAMILIES)})"
        )


def _special_tokens(tokenizer: Any) -> dict[str, int]:
    """The tokenizer's added special tokens (not its ordinary vocabulary: Qwen's BPE vocabulary
    also spells `</s>` as text, id 128247, which is no end marker there)."""
    return {
        added.content: int(i)
        for i, added in tokenizer.added_tokens_decoder.items()
        if getattr(added, "special", True)
    }


def _facts(
    tokenizer: Any, eos_ids: set[int], bos_policy: str, bos_id: int | None
) -> TokenizerFacts:
    special = _special_tokens(tokenizer)
    eos_ids |= {special[t] for t in END_MARKERS if t in special}
    fim = next(
        (
            FimTemplate(*style, **_fim_extras(special))
            for style in FIM_STYLES
            if all(t in special for t in style)
        ),
        None,
    )
    if fim is not None:
        # A FIM model that writes any of its FIM tokens has finished the middle.
        eos_ids |= {special[t] for t in fim.tokens()}
    template = getattr(tokenizer, "chat_template", None)
    return TokenizerFacts(
        sorted(eos_ids),
        bos_policy,
        bos_id if bos_policy == "always" else None,
        fim,
        template if isinstance(template, str) else None,
    )


def _fim_extras(special: dict[str, int]) -> dict[str, str]:
    return {field: token for field, token in FIM_EXTRAS.items() if token in special}


def _save_tokenizer(tokenizer: Any, facts: TokenizerFacts, out: Path) -> None:
    """Save a tokenizer whose own special-token settings agree with the facts."""
    if hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = facts.bos_policy == "always"
    # Keep the tokenizer's own end token when it is one of the stop tokens (Qwen:
    # `<|endoftext|>`), else name one that is: other readers of the folder stop on it.
    if facts.eos_token_ids and tokenizer.eos_token_id not in facts.eos_token_ids:
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

    meta, specials = _gguf_read(source.path)
    check_family(str(meta.get("general.architecture", "unknown")), source.path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path.parent, gguf_file=source.path.name)
    except (ValueError, KeyError, OSError) as exc:
        raise SourceError(f"{source.path}: transformers cannot load it ({exc})") from exc
    _keep_special_tokens(tokenizer, specials, source.path)
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
