"""bench/attribution.py's pure parts (no model): the attribution rule, the counts over positions,
the suffix stand-in and the patching."""

from __future__ import annotations

import types

from bench.attribution import (
    ASKED,
    CEILING,
    COLD,
    COLD_PROMPT,
    CONTEXT,
    DEADLINE,
    HEALING,
    NAMES,
    POST,
    SUFFIX,
    TIMED,
    UNEXPLAINED,
    WARM,
    ablations,
    answer_entry,
    attribute,
    flip_counts,
    groups_of,
    ledger,
    outcome,
    patched,
    served_differs,
    whole_lines_suffix,
)
from bench.unseen_repos import UnseenRepo

PARTS = {
    "no workspace": CONTEXT,
    "no definitions": CONTEXT,
    "no healing": HEALING,
    "no post-processing": POST,
    "no names": NAMES,
    "+ suffix 300": SUFFIX,
}


def test_outcomes() -> None:
    assert outcome(True, True) == "both"
    assert outcome(True, False) == "ceiling only"
    assert outcome(False, True) == "product only"
    assert outcome(False, False) == "neither"


def test_a_ceiling_only_position_is_lost_to_the_parts_whose_ablation_makes_it_right() -> None:
    got = attribute(
        {CEILING: True, WARM: False, "no healing": True, "no names": False, "+ suffix 300": True},
        PARTS,
    )
    assert got["outcome"] == "ceiling only"
    assert got["flips"] == ["no healing", "+ suffix 300"]
    assert got["lost"] == [HEALING, SUFFIX]
    assert got["gained"] == []


def test_a_product_only_position_is_gained_by_the_parts_whose_ablation_makes_it_wrong() -> None:
    got = attribute(
        {CEILING: False, WARM: True, "no workspace": False, "no definitions": False},
        PARTS,
    )
    assert got["outcome"] == "product only"
    assert got["gained"] == [CONTEXT]  # one part, however many of its ablations flip it
    assert got["lost"] == []


def test_no_flip_is_unexplained_and_both_or_neither_attribute_nothing() -> None:
    assert attribute({CEILING: True, WARM: False, "no healing": False}, PARTS)["lost"] == [
        UNEXPLAINED
    ]
    assert attribute({CEILING: False, WARM: True}, PARTS)["gained"] == [UNEXPLAINED]
    both = attribute({CEILING: True, WARM: True, "no healing": False}, PARTS)
    assert both["lost"] == both["gained"] == []
    assert both["flips"] == ["no healing"]  # still recorded: what the part is worth


def test_the_cold_prompt_takes_the_positions_only_the_cold_product_misses() -> None:
    assert attribute({CEILING: True, WARM: True, COLD: False}, PARTS)["cold"] == "lost"
    assert attribute({CEILING: False, WARM: False, COLD: True}, PARTS)["cold"] == "gained"
    # The warm product already misses it: that is the warm product's loss, not the cold prompt's.
    assert attribute({CEILING: True, WARM: False, COLD: False}, PARTS)["cold"] is None
    assert attribute({CEILING: True, WARM: True, COLD: True}, PARTS)["cold"] is None


def test_the_deadline_is_the_timed_warm_product_against_the_untimed_one() -> None:
    assert attribute({CEILING: True, WARM: True, TIMED: False}, PARTS)["deadline"] == "lost"
    assert attribute({CEILING: False, WARM: False, TIMED: True}, PARTS)["deadline"] == "gained"
    assert attribute({CEILING: False, WARM: True, TIMED: True}, PARTS)["deadline"] is None


def row(
    ex: dict[str, bool], *, repo: str = "a", unseen: bool = False, raw: bool | None = None
) -> dict:
    answers = {k: {"exact": v, "answer": "x" if v else "y"} for k, v in ex.items()}
    answers[WARM]["raw_exact"] = ex[WARM] if raw is None else raw
    return {
        "repo": repo,
        "unseen": unseen,
        "answers": answers,
        "attribution": attribute(ex, PARTS),
    }


def test_the_ledger_counts_the_gap_and_each_part() -> None:
    rows = [
        row({CEILING: True, WARM: False, COLD: False, "no healing": True, "no names": True}),
        row({CEILING: True, WARM: False, COLD: False, "no healing": False}),
        row({CEILING: False, WARM: True, COLD: True, "no workspace": False}),
        row({CEILING: True, WARM: True, COLD: False, TIMED: False}),
        row({CEILING: True, WARM: False, COLD: False}, raw=True),
    ]
    got = ledger(rows)
    assert got["positions"] == 5
    assert (got["ceiling_only"], got["product_only"]) == (3, 1)
    assert got["parts"][HEALING] == [1, 0]
    assert got["parts"][NAMES] == [1, 0]
    assert got["parts"][CONTEXT] == [0, 1]
    assert got["parts"][UNEXPLAINED] == [2, 0]
    assert got["parts"][COLD_PROMPT] == [1, 0]
    assert got["parts"][DEADLINE] == [1, 0]
    assert got["raw_right_shown_wrong"] == 1
    assert got["raw_wrong_shown_right"] == 0
    assert "asked" not in got


def test_the_ledger_counts_what_the_server_answered_otherwise() -> None:
    same = row({CEILING: True, WARM: True, COLD: False})
    same["answers"][WARM]["answer"] = "alse, nil"
    same["asked"] = {"answer": "alse, nil\n", "exact": True, "cold": False}
    other = row({CEILING: True, WARM: True, COLD: False})
    other["asked"] = {"answer": "something else", "exact": False, "cold": True}
    assert not served_differs(same)
    assert served_differs(other)
    got = ledger([same, other])
    assert (got["asked"], got["asked_cold"], got["asked_differs"]) == (2, 1, 1)


def test_flip_counts_are_against_the_warm_product_over_every_position() -> None:
    rows = [
        row({CEILING: True, WARM: True, "no healing": False}),
        row({CEILING: False, WARM: False, "no healing": True}),
        row({CEILING: False, WARM: False, "no healing": False}),
        row({CEILING: False, WARM: False}),  # the ablation not run here
    ]
    assert flip_counts(rows, ["no healing"]) == {"no healing": [1, 1]}


def test_groups_mark_the_unseen_repository_and_add_tuned_and_all() -> None:
    repos = [
        UnseenRepo("a", "https://github.com/o/a", "0" * 40, "python", "2025-01-01"),
        UnseenRepo("g", "https://github.com/o/g", "1" * 40, "go", "2025-01-01", unseen=True),
    ]
    rows = [
        row({CEILING: True, WARM: True}),
        row({CEILING: True, WARM: False}, repo="g", unseen=True),
    ]
    got = groups_of(rows, repos)
    assert list(got) == ["a", "g *", "tuned on (not *)", "all"]
    assert [len(v) for v in got.values()] == [1, 1, 1, 2]
    assert list(groups_of(rows[:1], repos[:1])) == ["a"]


def test_answers_are_scored_on_their_first_line_stripped() -> None:
    assert answer_entry("alse, nil\n    more", "alse, nil")["exact"]
    assert answer_entry("  alse, nil ", "alse, nil")["answer"] == "alse, nil"
    assert not answer_entry("", "")["exact"]  # an empty answer is a miss


def test_the_suffix_stand_in_gives_whole_lines_up_to_its_tokens() -> None:
    count = len  # a token per character
    after = ")\nline one\nline two\nline three"
    suffix = whole_lines_suffix(20)
    assert suffix(after, 0, 10_000, count) == ")\nline one\nline two"
    assert whole_lines_suffix(1)(after, 0, 10_000, count) == ")"  # the line's rest only


def test_patched_restores_the_module() -> None:
    module = types.SimpleNamespace(LIMIT=1.5)
    with patched(module, LIMIT=600.0):
        assert module.LIMIT == 600.0
    assert module.LIMIT == 1.5


def test_the_ablations_cover_the_issue_parts_and_name_each_once() -> None:
    every = ablations(300)
    names = [ab.name for ab in every]
    assert len(names) == len(set(names))
    assert {ab.part for ab in every} == {CONTEXT, HEALING, POST, NAMES, SUFFIX}
    assert "+ suffix 300" in names
    assert {ASKED, CEILING, WARM, COLD, TIMED}.isdisjoint(names)
