"""The one loop detector, as the decode loop and post-processing use it."""

from __future__ import annotations

from inference.repetition import ends_in_loop, first_repeated_line, first_wordy_loop


def test_a_piece_of_three_to_32_characters_four_times_at_the_end_is_a_loop() -> None:
    assert ends_in_loop("total = value_value_value_value_")
    assert ends_in_loop("x" + "Op: 'dyn', " * 4)
    assert not ends_in_loop("total = value_value_value_")
    assert not ends_in_loop("é_" * 3 + "ok")


def test_within_a_line_only_a_piece_with_a_letter_is_a_loop() -> None:
    assert first_wordy_loop("x = CARD_CARD_CARD_CA") == 4
    assert first_wordy_loop("row = [0, 0, 0, 0, 0, 0]") is None
    assert first_wordy_loop("# ========") is None
    assert first_wordy_loop("return max_max_") is None  # twice is not a loop


def test_the_third_identical_non_blank_line_is_where_a_line_loop_starts() -> None:
    assert first_repeated_line(["a = 1", "x += 1", "x += 1", "x += 1", "y"]) == 3
    assert first_repeated_line(["", "", "", "end"]) is None  # blank lines are layout
    assert first_repeated_line(["x += 1", "x += 1", "y", "x += 1"]) is None
