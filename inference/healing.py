"""Token healing: when the cursor is inside a word, the prompt's last token is a fragment.

"pri|" tokenizes as a rare fragment; the model saw "print" as one token in training. Back off
that last token and let generation re-produce it: the first tokens chosen must spell the removed
text (or extend it). The caller strips the removed text from the output.

The same goes for a space typed after code ("return a |"): BPE tokenizers such as SmolLM2's join
a space to the token after it (" +" is one token), so a prompt ending in a lone " " token is
rare in training and the model answers with a second space (" + b" after "a ": "a  + b"). Backing
off the trailing space token(s) and constraining the output to start with them lets the model
pick " +" itself.

Indentation is the same story: "\n    " is one token, but in training "\n    return" is "\n   "
then " return", so a prompt ending in the whole indentation token gets " return" (one space too
many on every new line). Backing off the indentation token lets the model re-spell it.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.tokenizer import Tokenizer
from inference.tuning import HEAL_MAX_INDENT_CHARS


@dataclass(frozen=True)
class Healed:
    ids: list[int]
    prefix: str  # text the generation must start with ("" when nothing was backed off)


HORIZONTAL_SPACE = " \t"


def heal(ids: list[int], tokenizer: Tokenizer, max_chars: int = 12) -> Healed:
    """Back off the last token when it ends inside a word (letters, digits, underscore), or the
    trailing tokens made only of spaces and tabs when code comes before them on their line, or a
    last token that is a line break and indentation. `max_chars` bounds what is backed off (a
    word or typed spaces; indentation has its own bound)."""
    if len(ids) < 2:
        return Healed(ids, "")
    last = tokenizer.token_text(ids[-1])
    if _is_indentation(last):
        return Healed(ids[:-1], last) if len(last) <= HEAL_MAX_INDENT_CHARS else Healed(ids, "")
    if last and not last.strip(HORIZONTAL_SPACE):
        return _heal_space(ids, tokenizer, max_chars)
    word = last.lstrip()
    if not word or len(last) > max_chars or not (word[-1].isalnum() or word[-1] == "_"):
        return Healed(ids, "")
    return Healed(ids[:-1], last)


def _is_indentation(text: str) -> bool:
    """A line break followed by spaces or tabs, in one token ("\n    ")."""
    head, brk, indent = text.rpartition("\n")
    return bool(brk) and not head.strip() and bool(indent) and not indent.strip(HORIZONTAL_SPACE)


def _heal_space(ids: list[int], tokenizer: Tokenizer, max_chars: int) -> Healed:
    """The trailing spaces/tabs backed off, when what is before them on the line is code."""
    space, kept = "", len(ids)
    while kept > 1:
        text = tokenizer.token_text(ids[kept - 1])
        if not text or text.strip(HORIZONTAL_SPACE):
            break
        space, kept = text + space, kept - 1
    before = tokenizer.token_text(ids[kept - 1])
    if (
        kept == len(ids)
        or len(space) > max_chars
        or not before.strip()  # only whitespace before it (or an empty special token)
        or before.rstrip(HORIZONTAL_SPACE).endswith(("\n", "\r"))  # indentation
    ):
        return Healed(ids, "")
    return Healed(ids[:kept], space)
