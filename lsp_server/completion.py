"""From a document and a cursor to a completion plan, and from model text to what the editor shows.

Plain functions, no LSP objects: the handlers in `server.py` only translate.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.generate import GenerationConfig
from lsp_server.positions import offset_at
from lsp_server.settings import Settings

BLOCK_OPENERS = (":", "{", "(", "[", "=>")
# The prompt window starts on a multiple of this many lines, so while the user types the prompt's
# start (and the KV cache behind it) stays put instead of sliding one line per keystroke.
WINDOW_STEP_LINES = 64
CHARS_PER_TOKEN = 3  # conservative for code; the engine refuses nothing, this only bounds work
SINGLE_LINE_DEADLINE_S = 1.5
MULTI_LINE_DEADLINE_S = 4.0
DRAFT_TOKENS = 8


@dataclass(frozen=True)
class CompletionPlan:
    prompt: str
    config: GenerationConfig
    single_line: bool
    line_prefix: str  # text of the cursor's line before the cursor
    line_suffix: str  # text of the cursor's line after the cursor


def is_single_line(line_prefix: str, line_suffix: str, multiline: str) -> bool:
    """Mid-line: the rest of the line. After a block opener or on an empty line: a block."""
    if multiline == "never":
        return True
    if multiline == "always":
        return False
    if line_suffix.strip():
        return True
    stripped = line_prefix.rstrip()
    return not (not stripped or stripped.endswith(BLOCK_OPENERS))


def window_start(lines: list[str], cursor_line: int, budget_chars: int) -> int:
    """First line of the prompt: a coarse step back from the cursor that fits the budget."""
    start = cursor_line - cursor_line % WINDOW_STEP_LINES
    used = sum(len(row) + 1 for row in lines[start : cursor_line + 1])
    while start > 0:
        step = lines[max(0, start - WINDOW_STEP_LINES) : start]
        cost = sum(len(row) + 1 for row in step)
        if used + cost > budget_chars:
            break
        used += cost
        start = max(0, start - WINDOW_STEP_LINES)
    return start


def plan_completion(text: str, line: int, character: int, settings: Settings) -> CompletionPlan:
    """Raises PositionError for a position outside the document."""
    offset = offset_at(text, line, character)
    lines = text.split("\n")
    line_prefix = text[sum(len(row) + 1 for row in lines[:line]) : offset]
    line_suffix = lines[line][len(line_prefix) :].removesuffix("\r")
    start_line = window_start(lines, line, settings.contextTokens * CHARS_PER_TOKEN)
    prompt_start = sum(len(row) + 1 for row in lines[:start_line])
    single = is_single_line(line_prefix, line_suffix, settings.multiline)
    config = GenerationConfig(
        max_new_tokens=settings.maxTokens,
        stop_at_newline=single,
        stop_strings=() if single else ("\n\n\n",),
        deadline_s=SINGLE_LINE_DEADLINE_S if single else MULTI_LINE_DEADLINE_S,
        draft_tokens=DRAFT_TOKENS,
    )
    return CompletionPlan(text[prompt_start:offset], config, single, line_prefix, line_suffix)


def clean_completion(text: str, plan: CompletionPlan) -> str:
    """The minimum the editor needs: no trailing blank space, nothing if there is no content."""
    text = "\n".join(row.rstrip() for row in text.split("\n")).rstrip()
    suffix = plan.line_suffix.strip()
    if suffix and text.endswith(suffix):
        # The model re-typed what is already right of the cursor (closing brackets, quotes).
        text = text[: -len(suffix)].rstrip()
    return text if text.strip() else ""
