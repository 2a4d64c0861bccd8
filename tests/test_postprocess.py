"""Golden tests: one per post-processing rule, then the whole chain."""

from __future__ import annotations

import pytest

from lsp_server.completion.plan import is_single_line
from lsp_server.completion.postprocess import (
    MINIMAL,
    NEXT_LINE,
    RULES,
    Processed,
    Site,
    drop_degenerate_repetition,
    drop_empty,
    drop_repeated_whitespace,
    drop_suffix_duplicate,
    postprocess,
    postprocess_report,
    stop_at_control_token,
    stop_at_dedent,
    stop_at_fence_or_prose,
    stop_at_newline,
    stop_at_repetition,
    trim_cut_off,
    trim_trailing_space,
)

MID = Site("    total = compute(", ")", single_line=True)
BLOCK = Site("def area(r):", "", single_line=False)
EMPTY_LINE = Site("    ", "", single_line=False)


@pytest.mark.parametrize(
    ("rule", "text", "site", "expected"),
    [
        (stop_at_newline, "a, b)\n    return total", MID, "a, b)"),
        (stop_at_newline, "\n    return 1", BLOCK, "\n    return 1"),
        (
            stop_at_fence_or_prose,
            "\n    return r * r\n```\nThis returns.",
            BLOCK,
            "\n    return r * r",
        ),
        (
            stop_at_fence_or_prose,
            "\n    x = 1\nThis function computes the area.",
            BLOCK,
            "\n    x = 1",
        ),
        (
            stop_at_fence_or_prose,
            "\n    note = 'This is fine.'",
            BLOCK,
            "\n    note = 'This is fine.'",
        ),
        (
            stop_at_dedent,
            "\n    return 3.14 * r * r\n\ndef other():\n    pass",
            BLOCK,
            "\n    return 3.14 * r * r\n",
        ),
        (stop_at_dedent, "x = 1\n    y = 2\nz = 3", EMPTY_LINE, "x = 1\n    y = 2"),
        (stop_at_repetition, "\n    a()\n    a()\n    a()\n    a()", BLOCK, "\n    a()\n    a()"),
        (stop_at_repetition, "\n    a()\n    b()\n    a()", BLOCK, "\n    a()\n    b()\n    a()"),
        (drop_degenerate_repetition, "CARD_CARD_CARD_CA", Site("x = ", "", True), ""),
        (drop_degenerate_repetition, "x_possible_max_max_max_max", MID, ""),
        (
            drop_degenerate_repetition,
            "'src_x', 'src_y', 'src_x', 'src_y', 'src_x', 'src_y', 'src_x']",
            Site("    cols = [", "", True),
            "",
        ),
        (drop_degenerate_repetition, "0, 0, 0, 0)", MID, "0, 0, 0, 0)"),  # zeros are code
        (drop_degenerate_repetition, '"=" * 40)', MID, '"=" * 40)'),
        (drop_degenerate_repetition, "\n    a = b\n    c = d", BLOCK, "\n    a = b\n    c = d"),
        # Trimmed to before the loop where code is left (as a cut-off completion would be).
        (
            drop_degenerate_repetition,
            "foo(a) + bar_bar_bar_bar",
            Site("x = ", "", True),
            "foo(a) +",
        ),
        (
            drop_degenerate_repetition,
            "\n    a = 1\n    b = CARD_CARD_CARD_CA",
            BLOCK,
            "\n    a = 1",  # the looping line goes, the whole lines before it stay
        ),
        (drop_degenerate_repetition, "(foo_foo_foo_foo", Site("x = ", "", True), ""),  # only "("
        (drop_repeated_whitespace, " + b", Site("    return a ", "", True), "+ b"),
        (drop_repeated_whitespace, "\t+ b", Site("    return a\t", "", True), "+ b"),
        (drop_repeated_whitespace, " + b", Site("    return a", "", True), " + b"),
        (drop_repeated_whitespace, "    pass", EMPTY_LINE, "    pass"),  # indentation
        (drop_suffix_duplicate, "a, b)", MID, "a, b"),
        (drop_suffix_duplicate, "a, b))", MID, "a, b)"),  # only the copy of the suffix goes
        (drop_suffix_duplicate, "x)", Site('print("', '")', True), "x"),
        (drop_suffix_duplicate, "x = 1", Site("", " # note", True), "x = 1"),
        (trim_trailing_space, "x = 1   \n  \n", MID, "x = 1"),
        (stop_at_control_token, "a, b)<|fim_suffix|>)\n", MID, "a, b)"),
        (stop_at_control_token, "<|fim_middle|>x", MID, ""),
        (stop_at_control_token, "\n    return r<|file_sep|>lib/b.py", BLOCK, "\n    return r"),
        (stop_at_control_token, "x <fim_suffix> y", MID, "x "),
        (stop_at_control_token, "a <| b |> c", MID, "a <| b |> c"),  # not a token
        (drop_empty, "  \n ", MID, ""),
        (drop_empty, "x", MID, "x"),
    ],
)
def test_rule(rule, text: str, site: Site, expected: str) -> None:
    assert rule(text, site) == expected


def test_chain() -> None:
    raw = "\n    return 3.14 * r * r   \n\n\ndef main():\n    print(area(2))\n```"
    assert postprocess(raw, BLOCK) == "\n    return 3.14 * r * r"
    assert postprocess("a, b)  \nmore", MID) == "a, b"
    assert postprocess(")", MID) == ""  # nothing but what is already there


def test_the_report_names_the_dropping_rule() -> None:
    def why(text: str) -> tuple[str, str | None]:
        report = postprocess_report(text, MID, cut_off=False)
        return report.text, report.dropped_by

    assert why(")") == ("", "drop_suffix_duplicate")
    assert why("  \n") == ("", None)  # nothing to drop
    assert why("a, b)") == ("a, b", None)


# -- Golden documents: the document with its cursor (CURSOR), the model's text, the document
# -- after accepting what is shown.

CURSOR = "█"


def _accept(doc: str, text: str, *, cut_off: bool = False, rules=RULES) -> tuple[str, Processed]:
    before, after = doc.split(CURSOR)
    prefix, suffix = before.rsplit("\n", 1)[-1], after.split("\n", 1)[0]
    site = Site(prefix, suffix, is_single_line(prefix, suffix, "auto"))
    report = postprocess_report(text, site, rules, cut_off=cut_off)
    return before + report.text + after, report


@pytest.mark.parametrize(
    ("doc", "text", "expected"),
    [
        # A space typed after code: the model's leading space would double it.
        (
            "def add(a, b):\n    return a █\n",
            " + b",
            "def add(a, b):\n    return a + b\n",
        ),
        (
            "def mul(x, y):\n    return x █\n",
            " * y",
            "def mul(x, y):\n    return x * y\n",
        ),
        (
            "import os\n\n\ndef full(a, b):\n    return str(os.path.join(a, █\n",
            " b))",
            "import os\n\n\ndef full(a, b):\n    return str(os.path.join(a, b))\n",
        ),
        (
            "def add(a, b):\n    return a\t█\n",
            "\t+ b",
            "def add(a, b):\n    return a\t+ b\n",
        ),
    ],
)
def test_no_repeated_whitespace(doc: str, text: str, expected: str) -> None:
    shown, report = _accept(doc, text)
    assert shown == expected
    assert report.trimmed_by[0] == "drop_repeated_whitespace"


@pytest.mark.parametrize(
    ("doc", "text", "expected"),
    [
        # No space before the cursor: the completion's own space is needed.
        ("def add(a, b):\n    return a█\n", " + b", "def add(a, b):\n    return a + b\n"),
        # Only indentation before the cursor: more indentation is the completion's own.
        (
            "def f(x):\n    if x:\n    █\n",
            "    return 1",
            "def f(x):\n    if x:\n        return 1\n",
        ),
    ],
)
def test_whitespace_the_document_lacks_is_kept(doc: str, text: str, expected: str) -> None:
    shown, report = _accept(doc, text)
    assert shown == expected
    assert "drop_repeated_whitespace" not in report.trimmed_by


@pytest.mark.parametrize(
    ("doc", "text", "expected"),
    [
        # The line was done: the model ends it first; the line after it is shown, dedented.
        (
            "def f(x):\n    if x:\n        return 1█\n",
            "\n    return 0\n\ndef g():",
            "def f(x):\n    if x:\n        return 1\n    return 0\n",
        ),
        # The line goes on: its rest only.
        ("def f(x):\n    y = x +█\n", " 1\n    return y", "def f(x):\n    y = x + 1\n"),
        # A space typed behind code is not doubled.
        ("    y = x █\n", "  + 1\n    return y", "    y = x + 1\n"),
        # A blank line, then the next line of code: both.
        ("x = 1█\n", "\n\ndef main():\n    pass", "x = 1\n\ndef main():\n"),
    ],
)
def test_at_a_line_end_its_rest_or_the_line_after_it(doc: str, text: str, expected: str) -> None:
    shown, _ = _accept(doc, text, rules=NEXT_LINE)
    assert shown == expected


def test_a_next_line_suggestion_keeps_its_indentation() -> None:
    doc = "def f(x):\n    y = x █\n"
    shown, _ = _accept(doc, "\n    return y", rules=NEXT_LINE)
    assert shown == "def f(x):\n    y = x \n    return y\n"


@pytest.mark.parametrize(
    ("doc", "text", "expected"),
    [
        # A name cut mid-way: it goes (the model might have gone on with it).
        (
            "def total(items):\n    subtotal = sum(items)\n    █\n",
            "return compute_tot",
            "def total(items):\n    subtotal = sum(items)\n    return\n",
        ),
        # Cut after a space: the last name was whole.
        ("    total = █\n", "compute(a, b) + ", "    total = compute(a, b) +\n"),
        # A string opened in the completion and cut inside: back to before its quote.
        (
            "for name in names:\n    █\n",
            'print("Processing the',
            "for name in names:\n    print(\n",
        ),
        # A string opened before the cursor, still open: its words are the completion.
        (
            'for name in names:\n    print("█")\n',
            "Processing the",
            'for name in names:\n    print("Processing")\n',
        ),
        # The string the completion opened was closed: only the partial name goes.
        ("    print(█)\n", '"Total:", tot', '    print("Total:",)\n'),
        # An apostrophe in a comment opens no string.
        ("    x = 1  # █\n", "don't touch th", "    x = 1  # don't touch\n"),
        # Several lines: the last one was cut somewhere inside, it goes entirely.
        (
            "def area(r):█\n",
            "\n    pi = 3.14159\n    return pi * r * r + compute_tot",
            "def area(r):\n    pi = 3.14159\n",
        ),
        (
            "    x = [█\n",
            "1, 2,\n        3, 4,\n        5, 6",
            "    x = [1, 2,\n        3, 4,\n",
        ),
        # Cut right after a newline: every line is whole.
        (
            "def area(r):█\n",
            "\n    pi = 3.14159\n    ",
            "def area(r):\n    pi = 3.14159\n",
        ),
        # A next-line suggestion's only line is treated as one line.
        (
            "def area(r):█\n",
            "\n    return compute_ar",
            "def area(r):\n    return\n",
        ),
    ],
)
def test_a_cut_off_completion_is_trimmed_to_a_sound_point(
    doc: str, text: str, expected: str
) -> None:
    shown, report = _accept(doc, text, cut_off=True)
    assert shown == expected
    assert report.dropped_by is None and report.trimmed_by[0] == "cut_off"


@pytest.mark.parametrize(
    ("doc", "text"),
    [
        ("    print(█)\n", '"Processing the'),  # all of it inside an unfinished string
        ("x = comp█\n", "ute_total_of_the_ite"),  # the rest of a name, cut inside
        (
            "def f():█\n",
            '\n    """Compute the total\n    of the ite',  # an unfinished docstring
        ),
        ("x = █\n", "  "),
    ],
)
def test_a_cut_off_completion_with_nothing_sound_is_not_shown(doc: str, text: str) -> None:
    shown, report = _accept(doc, text, cut_off=True)
    assert shown == doc.replace(CURSOR, "")
    assert report.dropped_by == ("cut_off" if text.strip() else None)


def test_only_a_cut_off_completion_is_trimmed() -> None:
    doc = "for name in names:\n    █\n"
    shown, report = _accept(doc, 'print("Processing the', cut_off=False)
    assert shown == 'for name in names:\n    print("Processing the\n'
    assert "cut_off" not in report.trimmed_by
    assert trim_cut_off('print("Processing the', Site("    ", "", False)) == "print("


def test_report_names_the_trimming_and_dropping_rules() -> None:
    shown, report = _accept("def area(r):█\n", "\n    a()\n    a()\n    a()\n    a()")
    assert shown == "def area(r):\n    a()\n    a()\n"
    assert report == Processed("\n    a()\n    a()", None, ("stop_at_repetition",))
    shown, report = _accept("    x = █\n", "foo(a) + bar_bar_bar_bar")
    assert shown == "    x = foo(a) +\n"
    assert report.trimmed_by == ("drop_degenerate_repetition",)
    _, report = _accept("    x = █\n", "CARD_CARD_CARD_CA")
    assert report == Processed("", "drop_degenerate_repetition", ())
    # A cut-off completion trimmed, then its space after a typed one dropped: both named.
    shown, report = _accept("    return a █\n", " + compute_tot", cut_off=True)
    assert shown == "    return a +\n"
    assert report.trimmed_by == ("cut_off", "drop_repeated_whitespace")


FIM_DOC = "def area(r: float) -> float:\n    return 3.14 * r\n\nprint(area(2))\n"
FIM_CURSOR = FIM_DOC.index(" * r") + 3  # `return 3.14 * r|`


@pytest.mark.parametrize("rules", [RULES, MINIMAL, NEXT_LINE], ids=["rules", "minimal", "next"])
@pytest.mark.parametrize(
    "raw",
    [
        " * r<|fim_suffix|>\n\nprint(area(2))<|fim_middle|>",
        "<|fim_pad|><|fim_pad|>",
        " * r<|endoftext|><|file_sep|>main.py\nimport area",
        "\n<|repo_name|>demo\n<|file_sep|>x.py",
    ],
)
def test_no_special_token_reaches_the_document(rules, raw: str) -> None:
    """The whole document with the cursor: whatever a FIM model spells out, the document the
    editor would show holds no special token."""
    line_prefix = FIM_DOC[:FIM_CURSOR].rsplit("\n", 1)[-1]
    line_suffix = FIM_DOC[FIM_CURSOR:].split("\n", 1)[0]
    site = Site(line_prefix, line_suffix, single_line=rules is not NEXT_LINE)
    shown = postprocess(raw, site, rules)
    after = FIM_DOC[:FIM_CURSOR] + shown + FIM_DOC[FIM_CURSOR:]
    assert "<|" not in after and "|>" not in after
