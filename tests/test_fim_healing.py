"""Token healing in a FIM prompt: the prefix is backed off where it ends (before the suffix
token), and the suffix and middle token follow unchanged. A generated Qwen-shaped tokenizer
(tests/qwen_gguf.py): no download."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inference.engine import _healed
from inference.generate import GenerationConfig
from inference.tokenizer import Tokenizer
from lsp_server.prompting.context import build_context
from lsp_server.workspace.snippet import Snippet
from models.convert import _save_tokenizer, gguf_tokenizer
from models.source import Source
from tests.qwen_gguf import QWEN_FIM, write_qwen_gguf

FIM = QWEN_FIM


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp("qwen")
    gguf = folder / "qwen.gguf"
    write_qwen_gguf(gguf)
    tokenizer, facts = gguf_tokenizer(Source("gguf", gguf, "test"))
    _save_tokenizer(tokenizer, facts, folder / "hf")
    tok = Tokenizer(folder / "hf" / "tokenizer.json")
    return SimpleNamespace(tokenizer=tok, manifest=SimpleNamespace(fim=facts.fim))


def _prompt(prefix: str, suffix: str) -> str:
    return f"{FIM.prefix}{prefix}{FIM.suffix}{suffix}{FIM.middle}"


def test_the_prefix_is_healed_not_the_middle_token(qwen: SimpleNamespace) -> None:
    tok = qwen.tokenizer
    ids = tok.encode(_prompt("x = de", "\nreturn x"))
    healed, config = _healed(qwen, ids, GenerationConfig(heal=True))
    suffix_at = ids.index(tok.special_id(FIM.suffix))
    assert config.constraint == "de"  # the word fragment before the cursor
    assert healed == ids[: suffix_at - 1] + ids[suffix_at:]  # only that token went
    assert healed[-1] == tok.special_id(FIM.middle)


def test_no_healing_when_the_plan_says_so(qwen: SimpleNamespace) -> None:
    ids = qwen.tokenizer.encode(_prompt("x = de", ""))
    assert _healed(qwen, ids, GenerationConfig(heal=False)) == (ids, GenerationConfig())


def test_a_plain_prompt_is_healed_at_its_end(qwen: SimpleNamespace) -> None:
    plain = SimpleNamespace(tokenizer=qwen.tokenizer, manifest=SimpleNamespace(fim=None))
    ids = qwen.tokenizer.encode("x = de")
    healed, config = _healed(plain, ids, GenerationConfig(heal=True))
    assert (healed, config.constraint) == (ids[:-1], "de")


def test_code_that_spells_special_tokens_stays_text(qwen: SimpleNamespace) -> None:
    """A tokenizer's own source mentions `<|fim_suffix|>`: the prompt must not take it for the
    real token, or healing and the model would see a second suffix."""
    tok = qwen.tokenizer
    text = 'SUFFIX = "<|fim_suffix|>"\nx = de'
    ctx = build_context(
        text,
        len(text),
        language_id="python",
        path="pkg/tokens.py",
        budget_tokens=400,
        count_tokens=lambda s: len(tok.encode(s)),
        fim=FIM,
        repo="demo",
    )
    ids = tok.encode(ctx.prompt)
    for token in (FIM.prefix, FIM.suffix, FIM.middle, FIM.repo_name):
        assert ids.count(tok.special_id(token)) == 1
    assert ctx.prompt.startswith("<|repo_name|>demo\n<|file_sep|>pkg/tokens.py\n<|fim_prefix|>")
    _, config = _healed(qwen, ids, GenerationConfig(heal=True))
    assert config.constraint == "de"


def test_repository_files_come_first_and_stay_put(qwen: SimpleNamespace) -> None:
    """Snippets as `<|file_sep|>` files before the current file: typing at the cursor changes
    only what follows `<|fim_prefix|>`."""
    tok = qwen.tokenizer
    snippets = (Snippet("lib/util.py", "def helper():\n    return 1"),)

    def prompt(text: str) -> str:
        return build_context(
            text,
            len(text.split("|")[0]),
            language_id="python",
            path="app.py",
            budget_tokens=400,
            count_tokens=lambda s: len(tok.encode(s)),
            fim=FIM,
            snippets=snippets,
            repo="demo",
        ).prompt

    one, two = prompt("x = hel|\nprint(x)"), prompt("x = help|\nprint(x)")
    stable = "<|repo_name|>demo\n<|file_sep|>lib/util.py\ndef helper():\n    return 1\n"
    stable += "<|file_sep|>app.py\n<|fim_prefix|>"
    assert one.startswith(stable) and two.startswith(stable)
    assert one.endswith("<|fim_suffix|>|\nprint(x)<|fim_middle|>")


def test_the_suffix_is_whole_lines_within_its_budget() -> None:
    from lsp_server.prompting.context import fim_suffix

    after = ")\n" + "\n".join(f"line_{i} = {i}" for i in range(100))
    count = len  # one token a character, for the test
    got = fim_suffix(after, 40, count)
    assert got.startswith(")\n") and not got.endswith("=")
    assert all(row == "" or row.startswith("line_") for row in got.split("\n")[1:])
    assert count(got) <= 40 + 1  # the cursor's own line always goes in
    assert fim_suffix(after, 0, count) == ")"  # no budget: the rest of the cursor's line only
    assert fim_suffix("x" * 50, 10, count) == "x" * 50  # the rest of the cursor's line
    assert len(fim_suffix("x" * 100_000, 40, count)) == 240  # unless it is minified code
    assert len(fim_suffix("x" * 100_000, 0, count)) == 192
