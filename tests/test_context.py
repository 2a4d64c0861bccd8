"""The context builder on real tree-sitter parses, healing, and other-file snippets."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.healing import heal
from inference.manifest import FimTemplate
from inference.tokenizer import Tokenizer
from lsp_server.prompting.context import AboveWindow, build_context
from lsp_server.workspace.snippets import pick_snippets

LONG = (
    "import os\nfrom pathlib import Path\n\n\n"
    + "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(60))
    + "class Store:\n    def __init__(self, root):\n        self.root = root\n\n"
    + "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(40))
    + "    def save(self, name):\n        path = os.path.join(self.root, name)\n        "
)


def _ctx(text: str, budget: int, **kw: object):
    return build_context(
        text,
        len(text),
        language_id=kw.pop("language_id", "python"),
        path="pkg/store.py",
        budget_tokens=budget,
        count_tokens=lambda s: len(s) // 3,
        **kw,
    )


def test_long_file_keeps_path_imports_and_enclosing_signatures() -> None:
    ctx = _ctx(LONG, budget=300)
    assert ctx.window_start_line > 0
    assert ctx.prompt.startswith("# pkg/store.py\nimport os\nfrom pathlib import Path\n")
    assert "class Store:\n" in ctx.prompt  # the enclosing class, although its start is cut off
    assert "def helper_3" not in ctx.prompt  # bodies of unrelated definitions go first
    assert ctx.prompt.endswith("path = os.path.join(self.root, name)\n        ")


def test_short_file_is_the_whole_prefix() -> None:
    text = "import os\n\ndef f():\n    return os.sep"
    ctx = _ctx(text, budget=1000)
    assert ctx.prompt == "# pkg/store.py\n" + text and ctx.window_start_line == 0


def test_prompt_start_is_stable_while_typing() -> None:
    typed = "if not os.path.exists(path):\n            return None"
    prompts = [_ctx(LONG + typed[:i], budget=300).prompt for i in range(len(typed))]
    first_lines = {p.split("\n", 6)[5] for p in prompts}
    assert len(first_lines) == 1  # every keystroke extends the same prompt: KV reuse


def test_a_short_budget_gets_the_nearest_whole_lines() -> None:
    """The cold-start prompt: a few lines before the cursor, starting on a line boundary, and
    the same start while the cursor's line grows (its KV is reused key to key)."""
    starts = set()
    for typed in ("p", "pa", "path.exists("):
        ctx = _ctx(LONG + typed, budget=40, step_lines=8)
        window = ctx.prompt.split("\n", 1)[1]
        assert LONG.endswith(window.removesuffix(typed)) and ctx.window_start_line > 0
        assert window.startswith("    def ") or window.startswith("        ")
        assert len(window) // 3 <= 40
        starts.add(ctx.window_start_line)
    assert len(starts) == 1


def test_what_lies_above_the_window_is_remembered_by_its_text() -> None:
    """Half-typed code below the window (an unclosed string here) changes how tree-sitter reads
    the document, but not the prompt's start: the text above the window is the same."""
    above = AboveWindow()
    calls: list[int] = []
    first = _ctx(LONG, budget=300, above=above).prompt
    broken = _ctx(LONG + 'x = """\n', budget=300, above=above).prompt
    head = first[: first.index("    def m")]
    assert "class Store:\n" in head and broken.startswith(head)
    seen = above.get("python", "unchanged", lambda: (calls.append(1), (["a"], ["b"]))[1])
    again = above.get("python", "unchanged", lambda: (calls.append(1), ([], []))[1])
    assert seen == again == (["a"], ["b"]) and len(calls) == 1
    assert above.get("python", "changed", lambda: ([], [])) == ([], [])


@pytest.mark.parametrize(
    ("language", "text", "marker"),
    [
        ("go", 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.', "//"),
        ("rust", "use std::fs;\n\nfn main() {\n    let x = fs::", "//"),
        ("typescript", "import { a } from './a';\nconst b: number = a.", "//"),
        ("typescriptreact", "const App = () => <div>{", "//"),
        ("javascript", "const fs = require('fs');\nfs.", "//"),
        ("plaintext", "some notes\nmore", None),
    ],
)
def test_languages(language: str, text: str, marker: str | None) -> None:
    ctx = _ctx(text, budget=1000, language_id=language)
    expected_head = f"{marker} pkg/store.py\n" if marker else ""
    assert ctx.prompt == expected_head + text


def test_strings_and_comments_are_detected() -> None:
    assert _ctx('x = "hello wor', budget=100).in_string_or_comment
    assert _ctx("x = 1  # a comm", budget=100).in_string_or_comment
    assert not _ctx("x = foo(", budget=100).in_string_or_comment


def test_fim_template_puts_the_suffix_in() -> None:
    text = "def f():\n    return 1\n"
    fim = FimTemplate("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
    ctx = build_context(
        text,
        9,
        language_id="python",
        path="a.py",
        budget_tokens=200,
        count_tokens=len,
        fim=fim,
    )
    assert ctx.prompt == "<fim_prefix># a.py\ndef f():\n<fim_suffix>    return 1\n<fim_middle>"


def test_snippets_come_first_and_pick_related_code() -> None:
    others = {
        "lib/store_utils.py": "def store_path(root, name):\n    return os.path.join(root, name)\n",
        "lib/unrelated.py": "def paint(canvas, colour):\n    canvas.fill(colour)\n",
    }
    picked = pick_snippets("path = os.path.join(self.root, name)", others, budget_chars=500)
    assert [s.path for s in picked] == ["lib/store_utils.py"]
    ctx = _ctx("x = store_", budget=500, snippets=picked)
    assert ctx.prompt.startswith("# lib/store_utils.py\n# def store_path(root, name):\n")
    assert ctx.prompt.endswith("# pkg/store.py\nx = store_")
    assert pick_snippets("x", others, budget_chars=500) == []


def test_healing_backs_off_a_word_fragment(real_model: Path) -> None:
    tok = Tokenizer(real_model / "fast" / "tokenizer.json")
    healed = heal(tok.encode("for x in items:\n    pri"), tok)
    assert healed.prefix == " pri"
    assert tok.decode(healed.ids) == "for x in items:\n   "
    allowed = {tok.token_text(i) for i in tok.vocab_index.allowed(" pri")}
    assert " print" in allowed and " p" in allowed and " x" not in allowed
    assert heal(tok.encode("foo("), tok).prefix == ""


def test_the_fim_suffix_is_kept_only_where_a_key_can_afford_it() -> None:
    """Every key before the suffix computes it again: two cores cannot afford it (and a cut-down
    one scored worse than none), a GPU keeps all of it."""
    from lsp_server.completion.plan import suffix_budget
    from lsp_server.config.tuning import FIM_SUFFIX_TOKENS

    assert suffix_budget(0.0017) == 0  # Qwen 0.5B on 2 cores: 128 tokens would be ~220 ms a key
    assert suffix_budget(0.00002) == FIM_SUFFIX_TOKENS  # a GPU: ~3 ms
