"""The one detector of a model looping: the same piece of text, or the same line, over and over.

The decode loop stops when the text so far ends in a loop; post-processing cuts a loop out of a
finished completion. Both ask here, with the counts that fit them."""

from __future__ import annotations

import re
from functools import cache

from inference.tuning import LOOP_END_TIMES, LOOP_LINE_TIMES, LOOP_PIECE_CHARS, LOOP_TAIL_CHARS


@cache
def _repeated(times: int, at_end: bool) -> re.Pattern[str]:
    low, high = LOOP_PIECE_CHARS
    return re.compile(rf"(.{{{low},{high}}}?)\1{{{times - 1},}}" + ("$" if at_end else ""), re.S)


def ends_in_loop(text: str, times: int = LOOP_END_TIMES) -> bool:
    """Whether `text` ends in one piece `times` times in a row (`_max_max_max_max`,
    `Op: "dyn", Op: "dyn", ...`): nothing after it is worth waiting for."""
    return _repeated(times, True).search(text[-LOOP_TAIL_CHARS:]) is not None


def first_wordy_loop(line: str, times: int = LOOP_LINE_TIMES) -> int | None:
    """Where the first piece with a letter in it repeated `times` times in a row starts in
    `line` (`CARD_CARD_CARD_CA`), or None."""
    for found in _repeated(times, False).finditer(line):
        if any(c.isalpha() for c in found.group(1)):
            return found.start()
    return None


def first_repeated_line(lines: list[str], times: int = LOOP_LINE_TIMES) -> int | None:
    """The index of the line that makes `times` identical non-blank lines in a row, or None."""
    run = 1
    for i in range(1, len(lines)):
        same = lines[i].strip() and lines[i] == lines[i - 1]
        run = run + 1 if same else 1
        if run >= times:
            return i
    return None
