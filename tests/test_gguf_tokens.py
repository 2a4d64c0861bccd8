"""A Qwen2-shaped GGUF keeps every control and user-defined token as one added special token.

transformers' GGUF conversion adds only `<|endoftext|>`, `<|im_start|>` and `<|im_end|>` for
Qwen2; models/convert.py must add the rest (FIM, repository and tool tokens) itself, or
`<|fim_prefix|>` is split into text. The GGUF is generated (tests/qwen_gguf.py): no download.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

import models.convert as convert
from inference.manifest import FimTemplate
from models.convert import TokenizerFacts, _save_tokenizer, gguf_tokenizer
from models.source import Source
from models.tokenizer_check import tokenizer_problems
from tests.qwen_gguf import (
    CHAT_TEMPLATE,
    FIM_TOKENS,
    QWEN_FIM,
    QWEN_SPECIALS,
    qwen_vocabulary,
    write_qwen_gguf,
)

VOCAB_SIZE = len(qwen_vocabulary())  # the GGUF's token count: the model's vocabulary size
ORDINARY = {t: i for i, t in enumerate(qwen_vocabulary()) if t not in QWEN_SPECIALS}


def _build(folder: Path, **options: Any) -> tuple[dict[str, int], TokenizerFacts, Path]:
    """Generate the GGUF, read it the build's way and save its tokenizer as the build does."""
    folder.mkdir()
    path = folder / "qwen2.5-coder-test.gguf"
    ids = write_qwen_gguf(path, **options)
    tokenizer, facts = gguf_tokenizer(Source("gguf", path, "test"))
    out = folder / "hf"
    _save_tokenizer(tokenizer, facts, out)
    return ids, facts, out / "tokenizer.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, int], TokenizerFacts, Path]:
    return _build(tmp_path_factory.mktemp("qwen") / "gguf")


def _encode(tokenizer_json: Path, text: str) -> list[int]:
    return Tokenizer.from_file(str(tokenizer_json)).encode(text, add_special_tokens=False).ids


def test_the_generated_file_is_qwen_shaped(
    built: tuple[dict[str, int], TokenizerFacts, Path],
) -> None:
    ids, _, tokenizer_json = built
    assert list(ids) == list(QWEN_SPECIALS)
    assert sorted(ids.values()) == list(range(ids["<|endoftext|>"], ids["<|file_sep|>"] + 1))
    assert Tokenizer.from_file(str(tokenizer_json)).get_vocab_size() == VOCAB_SIZE
    # `def` and ` return` are one ordinary token each; `</s>` is an ordinary vocabulary entry.
    assert _encode(tokenizer_json, "def") == [ORDINARY["def"]]
    assert _encode(tokenizer_json, " return") == [ORDINARY["Ġreturn"]]
    assert "</s>" in ORDINARY


@pytest.mark.parametrize("token", QWEN_SPECIALS)
def test_every_special_token_encodes_to_its_one_id(
    built: tuple[dict[str, int], TokenizerFacts, Path], token: str
) -> None:
    ids, _, tokenizer_json = built
    assert _encode(tokenizer_json, token) == [ids[token]]
    assert _encode(tokenizer_json, f"{token}def") == [ids[token], ORDINARY["def"]]


def test_a_fim_prompt_keeps_its_tokens_whole(
    built: tuple[dict[str, int], TokenizerFacts, Path],
) -> None:
    ids, _, tokenizer_json = built
    prompt = "<|repo_name|>r<|file_sep|>a.py\n<|fim_prefix|>def<|fim_suffix|> return<|fim_middle|>"
    assert _encode(tokenizer_json, prompt) == [
        ids["<|repo_name|>"],
        ORDINARY["r"],
        ids["<|file_sep|>"],
        ORDINARY["a"],
        ORDINARY["."],
        ORDINARY["p"],
        ORDINARY["y"],
        ORDINARY["Ċ"],
        ids["<|fim_prefix|>"],
        ORDINARY["def"],
        ids["<|fim_suffix|>"],
        ORDINARY["Ġreturn"],
        ids["<|fim_middle|>"],
    ]


def test_facts_name_the_qwen_fim_template_and_stop_tokens(
    built: tuple[dict[str, int], TokenizerFacts, Path],
) -> None:
    ids, facts, _ = built
    assert facts.fim == QWEN_FIM
    stops = ["<|endoftext|>", "<|im_end|>", "<|file_sep|>", *QWEN_FIM.tokens()]
    assert facts.eos_token_ids == sorted({ids[t] for t in stops})
    assert all(0 <= i < VOCAB_SIZE for i in facts.eos_token_ids)
    # An ordinary token spelled like an end marker is text, not a stop token.
    assert ORDINARY["</s>"] not in facts.eos_token_ids
    assert not set(facts.eos_token_ids) & set(ORDINARY.values())
    assert (facts.bos_policy, facts.bos_token_id) == ("never", None)
    assert facts.chat_template == CHAT_TEMPLATE


def test_the_saved_tokenizer_has_no_problems(
    built: tuple[dict[str, int], TokenizerFacts, Path],
) -> None:
    _, facts, tokenizer_json = built
    assert _problems(tokenizer_json, facts) == []


def test_fim_tokens_that_are_not_added_tokens_are_reported(
    built: tuple[dict[str, int], TokenizerFacts, Path], tmp_path: Path
) -> None:
    _, facts, tokenizer_json = built
    data = json.loads(tokenizer_json.read_text())
    kept = [t for t in data["added_tokens"] if not t["content"].startswith("<|fim_")]
    assert len(data["added_tokens"]) - len(kept) == len(FIM_TOKENS)
    data["added_tokens"] = kept
    broken = tmp_path / "tokenizer.json"
    broken.write_text(json.dumps(data, ensure_ascii=False))
    problems = _problems(broken, facts)
    assert len(problems) == len(FIM_TOKENS)
    for token in FIM_TOKENS:
        line = next(p for p in problems if p.startswith(f"FIM token {token!r} encodes to "))
        assert int(line.split(" encodes to ")[1].split(" ")[0]) > 1, line


def test_a_stop_id_outside_the_vocabulary_is_reported(
    built: tuple[dict[str, int], TokenizerFacts, Path],
) -> None:
    _, facts, tokenizer_json = built
    facts = TokenizerFacts([*facts.eos_token_ids, VOCAB_SIZE], "never", None, facts.fim)
    assert _problems(tokenizer_json, facts) == [
        f"stop id {VOCAB_SIZE} is outside the vocabulary (size {VOCAB_SIZE})"
    ]


def test_fim_tokens_of_ordinary_type_are_not_kept(tmp_path: Path) -> None:
    """The GGUF's token types decide: `<|fim_*|>` entries of type 1 are text, so no FIM."""
    ids, facts, tokenizer_json = _build(tmp_path / "gguf", drop_fim_from_specials=True)
    assert facts.fim is None
    stops = ["<|endoftext|>", "<|im_end|>", "<|file_sep|>"]  # its END_MARKERS, no FIM ones
    assert facts.eos_token_ids == sorted(ids[t] for t in stops)
    assert len(_encode(tokenizer_json, "<|fim_prefix|>")) > 1
    assert _encode(tokenizer_json, "<tool_call>") == [ids["<tool_call>"]]
    problems = _problems(tokenizer_json, facts, fim=QWEN_FIM)
    demoted = [t for t in QWEN_FIM.tokens() if t in FIM_TOKENS]
    assert [p.split(" encodes to ")[0] for p in problems] == [f"FIM token {t!r}" for t in demoted]


def test_without_keeping_gguf_specials_transformers_splits_fim_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `_keep_special_tokens` is for: transformers alone adds 3 of Qwen's 22 tokens."""
    monkeypatch.setattr(convert, "_keep_special_tokens", lambda *_: None)
    ids, facts, tokenizer_json = _build(tmp_path / "gguf")
    assert facts.fim is None
    assert len(_encode(tokenizer_json, "<|fim_prefix|>")) > 1
    assert _encode(tokenizer_json, "<|im_end|>") == [ids["<|im_end|>"]]


def _problems(
    tokenizer_json: Path, facts: TokenizerFacts, *, fim: FimTemplate | None = None
) -> list[str]:
    return tokenizer_problems(
        tokenizer_json,
        eos_token_ids=facts.eos_token_ids,
        fim=fim or facts.fim,
        chat_template=CHAT_TEMPLATE,
        vocab_size=VOCAB_SIZE,
    )
