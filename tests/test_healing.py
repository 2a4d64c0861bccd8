"""Token healing (inference/healing.py): a word fragment, or spaces typed after code, at the
prompt's end are backed off and the output constrained to re-produce them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inference.engine import Engine, EngineConfig
from inference.healing import heal
from inference.router import Task
from inference.tokenizer import Tokenizer
from lsp_server.completion.plan import PipelineOptions, plan_completion
from lsp_server.completion.postprocess import postprocess
from lsp_server.config.settings import Settings


@pytest.fixture(scope="module")
def tok(real_model: Path) -> Tokenizer:
    return Tokenizer(real_model / "fast" / "tokenizer.json")


@pytest.mark.parametrize(
    ("prompt", "prefix"),
    [
        ("def add(a, b):\n    return a ", " "),
        ("    return x ", " "),
        ("os.path.join(a, ", " "),
        ("foo(a,  ", "  "),  # two spaces typed: both backed off
        ("y = a\t", "\t"),
        ("f(a, \t", " \t"),  # a space token and a tab token: the whole run
        ("x = 1\n    y ", " "),
    ],
)
def test_heal_backs_off_spaces_typed_after_code(tok: Tokenizer, prompt: str, prefix: str) -> None:
    healed = heal(tok.encode(prompt), tok)
    assert healed.prefix == prefix
    assert tok.decode(healed.ids) + healed.prefix == prompt


@pytest.mark.parametrize(
    "prompt",
    [
        "a" + " " * 20,  # more than max_chars of spaces: left as it is
        "foo(",
        " ",  # a single token: nothing to back off to
    ],
)
def test_heal_leaves_non_fragments(tok: Tokenizer, prompt: str) -> None:
    ids = tok.encode(prompt)
    assert heal(ids, tok).prefix == ""
    assert heal(ids, tok).ids == ids


@pytest.mark.parametrize(
    ("prompt", "indentation"),
    [
        ("def f():\n    ", "\n    "),  # one "\n    " token; training text has "\n   " " return"
        ("x = 1\n\t", "\n\t"),
        ("x = 1\n\n        ", "\n        "),
    ],
)
def test_heal_backs_off_the_indentation_token(
    tok: Tokenizer, prompt: str, indentation: str
) -> None:
    ids = tok.encode(prompt)
    healed = heal(ids, tok)
    assert healed.prefix.endswith(indentation.lstrip("\n")) and "\n" in healed.prefix
    assert tok.decode(healed.ids) + healed.prefix == prompt


def test_heal_still_backs_off_a_word_fragment(tok: Tokenizer) -> None:
    healed = heal(tok.encode("for x in items:\n    pri"), tok)
    assert healed.prefix == " pri"
    assert tok.decode(healed.ids) == "for x in items:\n   "


def test_a_space_constraint_allows_the_space_led_tokens(tok: Tokenizer) -> None:
    allowed = {tok.token_text(i) for i in tok.vocab_index.allowed(" ")}
    assert {" +", " b", " *", " =="} <= allowed
    assert "+" not in allowed and "b" not in allowed and "\n" not in allowed


@pytest.mark.parametrize(
    ("doc", "heals"),
    [
        ("def add(a, b):\n    return a |\n", True),  # a space after code
        ("def add(a, b):\n    return a\t|\n", True),
        ("x = pri|\n", True),  # inside a word (as before)
        ("def add(a, b):\n    |\n", True),  # indentation only: one "\n    " token
        ("def add(a, b):\n    return (a +|\n", False),
        ("def add(a, b):\n|\n", False),
    ],
)
def test_plan_heals_after_a_typed_space(doc: str, heals: bool) -> None:
    before = doc.split("|")[0]
    line, character = before.count("\n"), len(before.rsplit("\n", 1)[-1])
    text = doc.replace("|", "")
    assert plan_completion(text, line, character, Settings()).config.heal is heals
    off = PipelineOptions(heal=False)
    assert not plan_completion(text, line, character, Settings(), options=off).config.heal


@pytest.mark.real_model
@pytest.mark.parametrize(
    "doc",
    [
        "def add(a, b):\n    return a |\n",
        "def mul(x, y):\n    return x |\n",
        "import os\n\n\ndef full(a, b):\n    return os.path.join(a, |\n",
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    |\n",  # after indentation
    ],
)
def test_no_second_space_after_a_typed_one(real_model: Path, doc: str) -> None:
    """The model saw the prompt end in a lone " " token and began with another space (`return a
    + b` after `return a `); healed, its first token re-spells the space (" +")."""
    engine = Engine(
        EngineConfig(
            fast_dir=real_model / "fast", standard_dir=real_model / "standard", cache_dir=None
        )
    )
    before = doc.split("|")[0]
    line, character = before.count("\n"), len(before.rsplit("\n", 1)[-1])
    text = doc.replace("|", "")
    plan = plan_completion(text, line, character, Settings(), language_id="python", path="a.py")
    assert plan.config.heal
    config = replace(plan.config, deadline_s=None)  # a slow CI host must not time out
    result = engine.generate(Task.COMPLETION, plan.prompt, config, fast_mode=True)
    assert result.text.strip() and not result.text[0].isspace()
    shown = postprocess(result.text, plan.site)
    completed = (before + shown).rsplit("\n", 1)[-1]
    assert "  " not in completed.strip()
