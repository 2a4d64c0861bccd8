"""Completion post-processing: each rule a small named function, applied in order (as Tabby does).

A rule takes the completion text and the `Site` it will be inserted at and returns the text to
keep ("" drops the completion). Golden tests in tests/test_postprocess.py pin each one down.
A completion cut by the token limit is first trimmed to its last sound point (`trim_cut_off`);
`postprocess_report` says which step trimmed or dropped what.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from inference.healing import HORIZONTAL_SPACE
from inference.repetition import first_repeated_line, first_wordy_loop

PROSE = re.compile(
    r"^\s*(?:This|The|Here|Note|In this|Explanation|Output|Example usage)\b[^=(){}\[\];]*[.:]\s*$"
)


@dataclass(frozen=True)
class Site:
    line_prefix: str  # the cursor's line up to the cursor
    line_suffix: str  # the cursor's line after the cursor
    single_line: bool


Rule = Callable[[str, Site], str]

PARTIAL_NAME = re.compile(r"[A-Za-z0-9_]+$")
QUOTES = "\"'`"


def drop_repeated_whitespace(text: str, site: Site) -> str:
    """After a space typed behind code (`return a |`), a completion starting with spaces or tabs
    would double it (`return a  + b`): drop its leading spaces and tabs. Indentation (a line of
    only whitespace) is left alone."""
    prefix = site.line_prefix
    if prefix.strip() and prefix.endswith(tuple(HORIZONTAL_SPACE)):
        return text.lstrip(HORIZONTAL_SPACE)
    return text


def _open_string(code: str) -> int | None:
    """Where the string literal still open at the end of `code` opens (None: none is).

    Deliberately simple and language-agnostic: quotes are " ' ` and three of " or ' in a row;
    a backslash escapes the next character; a one-quote string (not `) ends at its line's end;
    `#` or `//` outside a string starts a comment that runs to the line's end (so an apostrophe
    in a comment opens nothing; `#include "a` is not seen as an open string)."""
    i, opened, quote = 0, None, ""
    while i < len(code):
        c = code[i]
        if quote:
            if c == "\\":
                i += 2
            elif code.startswith(quote, i):
                i, opened, quote = i + len(quote), None, ""
            else:
                if c == "\n" and quote in ("'", '"'):
                    opened, quote = None, ""
                i += 1
        elif c == "#" or code.startswith("//", i):
            end = code.find("\n", i)
            if end < 0:
                break
            i = end
        elif c in QUOTES:
            quote = code[i : i + 3] if code[i : i + 3] in ('"""', "'''") else c
            opened, i = i, i + len(quote)
        else:
            i += 1
    return opened


def trim_cut_off(text: str, site: Site) -> str:
    """A completion cut by the token limit, trimmed to its last sound point ("" if none is left).

    - Cut right after a newline: every line is whole; only trailing whitespace goes.
    - Several lines of completion (the last one not the first with code in it): the last line
      was cut somewhere inside, so it goes entirely.
    - One line: a trailing run of letters, digits and underscores goes (the model might have
      gone on with the name: `compute_tot`), unless whitespace follows it (the name was done).
    - Then a string literal opened in the completion and still open at its end is cut back to
      before its opening quote (`print("Processing the` -> `print(`). The cursor's line counts
      (only that line: the site knows no more): a string opened before the cursor and still open
      is the string being written, its text is kept (`print("|` + `Processing the` ->
      `Processing`).
    """
    stripped = text.rstrip()
    if not stripped:
        return ""
    trailing = text[len(stripped) :]
    if "\n" not in trailing:  # the last line was cut inside
        lines = stripped.split("\n")
        first_code = next(i for i, line in enumerate(lines) if line.strip())
        if len(lines) - 1 > first_code:
            stripped = "\n".join(lines[:-1]).rstrip()
        elif not trailing:
            stripped = PARTIAL_NAME.sub("", stripped).rstrip()
    prefix = site.line_prefix
    opened = _open_string(prefix + stripped)
    if opened is not None and opened >= len(prefix):
        stripped = stripped[: opened - len(prefix)].rstrip()
    return stripped if stripped.strip() else ""


def stop_at_newline(text: str, site: Site) -> str:
    """Single-line mode: only the rest of the current line."""
    return text.split("\n", 1)[0] if site.single_line else text


def stop_after_line(text: str, site: Site) -> str:
    """At a line's end: the rest of the line, or where the answer starts by ending the line (the
    line was done), the line after it, its leading newline and indentation kept."""
    written = len(text) - len(text.lstrip())
    end = text.find("\n", written)
    return text if end < 0 else text[:end]


def stop_at_fence_or_prose(text: str, site: Site) -> str:
    """Small chat-tuned models drift into markdown fences and explanations: cut there."""
    kept = []
    for line in text.split("\n"):
        if line.lstrip().startswith("```") or PROSE.match(line):
            break
        kept.append(line)
    return "\n".join(kept)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(HORIZONTAL_SPACE))


def block_floor(site: Site) -> int:
    """The least indentation a later line of a block completion keeps: after an opener the
    block is deeper than its line. The decode loop stops there too (GenerationConfig's
    block_indent), so that a block answer is not written past where this cuts it."""
    base = _indent(site.line_prefix) if site.line_prefix.strip() else len(site.line_prefix)
    opener = site.line_prefix.rstrip().endswith((":", "{", "(", "["))
    return base + 1 if opener else base


def stop_at_dedent(text: str, site: Site) -> str:
    """A block completion ends where a line's indentation leaves the block being written."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    floor = block_floor(site)
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and _indent(line) < floor:
            break
        kept.append(line)
    return "\n".join(kept)


def stop_at_repetition(text: str, site: Site) -> str:
    """Cut at the third identical (non-blank) line in a row: the model is looping."""
    lines = text.split("\n")
    i = first_repeated_line(lines)
    return text if i is None else "\n".join(lines[:i])  # keep the first two, drop the loop


def drop_degenerate_repetition(text: str, site: Site) -> str:
    """A piece with a letter in it, three times in a row within a line (`CARD_CARD_CARD_CA`):
    a model looping, not code (`0, 0, 0` and `====` are code). The loop is cut off with what it
    is glued to (`x_possible_max_max_max` goes whole) and the rest trimmed to its last sound
    point as a cut-off completion would be (`foo(a) + bar_bar_bar_bar` -> `foo(a) +`; whole lines
    before the loop's line stay). Nothing is shown when no code with a letter or digit is left."""
    start = 0
    for line in text.split("\n"):
        at = first_wordy_loop(line)
        if at is not None:
            kept = trim_cut_off(text[: start + at], site)
            return kept if any(c.isalnum() for c in kept) else ""
        start += len(line) + 1
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


# Special tokens of code models' prompt formats (FIM, repository files, chat, end of text), as
# text: a model (or a remote server) that spells one out has left the middle it was filling.
CONTROL_TOKEN = re.compile(
    r"<\|(?:fim_\w+|file_sep|repo_name|endoftext|im_start|im_end|end_of_text|eot_id)\|>"
    r"|<(?:fim_\w+|file_sep|repo_name|reponame|filename|gh_stars)>"
    r"|<(?:PRE|SUF|MID|EOT)>"
)


def stop_at_control_token(text: str, site: Site) -> str:
    """Cut at the first special token spelled as text: none ever reaches the editor."""
    found = CONTROL_TOKEN.search(text)
    return text[: found.start()] if found else text


def drop_empty(text: str, site: Site) -> str:
    return text if text.strip() else ""


RULES: tuple[Rule, ...] = (
    stop_at_control_token,
    drop_repeated_whitespace,
    stop_at_newline,
    stop_at_fence_or_prose,
    stop_at_dedent,
    stop_at_repetition,
    drop_degenerate_repetition,
    drop_suffix_duplicate,
    trim_trailing_space,
    drop_empty,
)
MINIMAL: tuple[Rule, ...] = (
    stop_at_control_token,
    stop_at_newline,
    trim_trailing_space,
    drop_empty,
)
# At a line's end: its rest, or the line after it (a suggestion that starts with a newline; it
# may well dedent, so no stop_at_dedent; drop_repeated_whitespace leaves a leading newline's
# indentation alone).
NEXT_LINE: tuple[Rule, ...] = (
    stop_at_control_token,
    drop_repeated_whitespace,
    stop_after_line,
    stop_at_fence_or_prose,
    stop_at_repetition,
    drop_degenerate_repetition,
    trim_trailing_space,
    drop_empty,
)
CUT_OFF = "cut_off"  # the name `trim_cut_off` is reported under


@dataclass(frozen=True)
class Processed:
    text: str  # what to show ("" for nothing)
    dropped_by: str | None  # the step that emptied it (None: kept, or the model gave only space)
    trimmed_by: tuple[str, ...]  # the steps that changed it without emptying it, in order


def postprocess_report(
    text: str, site: Site, rules: tuple[Rule, ...] = RULES, *, cut_off: bool
) -> Processed:
    """Apply `trim_cut_off` first when generation stopped at the token limit (`cut_off`), then
    `rules` in order. A step is named by its function's name, `trim_cut_off` as "cut_off"."""
    if not text.strip():
        return Processed("", None, ())
    steps: tuple[Rule, ...] = ((trim_cut_off,) if cut_off else ()) + tuple(rules)
    trimmed: list[str] = []
    for step in steps:
        name = CUT_OFF if step is trim_cut_off else step.__name__
        after = step(text, site)
        if not after:
            return Processed("", name, tuple(trimmed))
        if after != text:
            trimmed.append(name)
        text = after
    return Processed(text, None, tuple(trimmed))


def postprocess(text: str, site: Site, rules: tuple[Rule, ...] = RULES) -> str:
    return postprocess_report(text, site, rules, cut_off=False).text
