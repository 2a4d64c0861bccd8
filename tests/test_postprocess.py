"""Golden tests: one per post-processing rule, then the whole chain."""

from __future__ import annotations

import pytest

from lsp_server.postprocess import (
    Site,
    drop_degenerate_repetition,
    drop_empty,
    drop_suffix_duplicate,
    postprocess,
    stop_at_dedent,
    stop_at_fence_or_prose,
    stop_at_newline,
    stop_at_repetition,
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
        (drop_suffix_duplicate, "a, b)", MID, "a, b"),
        (drop_suffix_duplicate, "a, b))", MID, "a, b)"),  # only the copy of the suffix goes
        (drop_suffix_duplicate, "x)", Site('print("', '")', True), "x"),
        (drop_suffix_duplicate, "x = 1", Site("", " # note", True), "x = 1"),
        (trim_trailing_space, "x = 1   \n  \n", MID, "x = 1"),
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
