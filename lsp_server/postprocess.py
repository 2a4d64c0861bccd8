"""Completion post-processing: each rule a small named function, applied in order (as Tabby does).

A rule takes the completion text and the `Site` it will be inserted at and returns the text to
keep ("" drops the completion). Golden tests in tests/test_postprocess.py pin each one down.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

PROSE = re.compile(
    r"^\s*(?:This|The|Here|Note|In this|Explanation|Output|Example usage)\b[^=(){}\[\];]*[.:]\s*$"
)


@dataclass(frozen=True)
class Site:
    line_prefix: str  # the cursor's line up to the cursor
    line_suffix: str  # the cursor's line after the cursor
    single_line: bool


Rule = Callable[[str, Site], str]


def stop_at_newline(text: str, site: Site) -> str:
    """Single-line mode: only the rest of the current line."""
    return text.split("\n", 1)[0] if site.single_line else text


def stop_at_fence_or_prose(text: str, site: Site) -> str:
    """Small chat-tuned models drift into markdown fences and explanations: cut there."""
    kept = []
    for line in text.split("\n"):
        if line.lstrip().startswith("```") or PROSE.match(line):
            break
        kept.append(line)
    return "\n".join(kept)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def stop_at_dedent(text: str, site: Site) -> str:
    """A block completion ends where a line's indentation leaves the block being written."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    base = _indent(site.line_prefix) if site.line_prefix.strip() else len(site.line_prefix)
    opener = site.line_prefix.rstrip().endswith((":", "{", "(", "["))
    floor = base + 1 if opener else base  # after an opener the block is deeper than its line
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and _indent(line) < floor:
            break
        kept.append(line)
    return "\n".join(kept)


def stop_at_repetition(text: str, site: Site, repeats: int = 3) -> str:
    """Cut at the third identical (non-blank) line in a row: the model is looping."""
    lines = text.split("\n")
    run = 1
    for i in range(1, len(lines)):
        same = lines[i].strip() and lines[i] == lines[i - 1]
        run = run + 1 if same else 1
        if run >= repeats:
            return "\n".join(lines[:i])  # keep the first two, drop the loop
    return text


REPEATED = re.compile(r"(.{3,32}?)\1{2,}")


def drop_degenerate_repetition(text: str, site: Site) -> str:
    """A piece with a letter in it, three times in a row within a line (`CARD_CARD_CARD_CA`):
    a model looping, not code (`0, 0, 0` and `====` are code). Nothing of it is shown."""
    for line in text.split("\n"):
        for found in REPEATED.finditer(line):
            if any(c.isalpha() for c in found.group(1)):
                return ""
    return text


def drop_suffix_duplicate(text: str, site: Site) -> str:
    """Drop what is already right of the cursor (closing brackets, quotes) from the end."""
    suffix = site.line_suffix.strip()
    if not suffix:
        return text
    first, *rest = text.split("\n", 1)
    trimmed = first.rstrip()
    if trimmed.endswith(suffix):
        first = trimmed[: -len(suffix)]
    elif all(c in ")]}\"'`;," for c in suffix):
        # Closers typed ahead by the editor: drop a trailing run of the same closers.
        while trimmed and trimmed[-1] in suffix and trimmed[-1] in ")]}\"'`":
            trimmed = trimmed[:-1]
        first = trimmed
    return "\n".join([first, *rest])


def trim_trailing_space(text: str, site: Site) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n ")


def drop_empty(text: str, site: Site) -> str:
    return text if text.strip() else ""


RULES: tuple[Rule, ...] = (
    stop_at_newline,
    stop_at_fence_or_prose,
    stop_at_dedent,
    stop_at_repetition,
    drop_degenerate_repetition,
    drop_suffix_duplicate,
    trim_trailing_space,
    drop_empty,
)
MINIMAL: tuple[Rule, ...] = (stop_at_newline, trim_trailing_space, drop_empty)
# The line after the cursor's (a suggestion that starts with a newline): it may well dedent.
NEXT_LINE: tuple[Rule, ...] = (
    stop_at_fence_or_prose,
    drop_degenerate_repetition,
    trim_trailing_space,
    drop_empty,
)


def postprocess(text: str, site: Site, rules: tuple[Rule, ...] = RULES) -> str:
    return postprocess_why(text, site, rules)[0]


def postprocess_why(
    text: str, site: Site, rules: tuple[Rule, ...] = RULES
) -> tuple[str, str | None]:
    """The text to show, and the name of the rule that dropped it when nothing is left (None
    when there was nothing to drop: the model gave no text, or only whitespace)."""
    if not text.strip():
        return "", None
    for rule in rules:
        text = rule(text, site)
        if not text:
            return "", rule.__name__
    return text, None
