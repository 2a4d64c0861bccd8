"""Prompts for the standard model's chat tasks (explain, refactor) and reading its answers."""

from __future__ import annotations

import re

from inference.generate import GenerationConfig
from lsp_server.text.languages import fence_name
from lsp_server.text.syntax import syntax_issues

# Chat messages only: each model renders them with its own chat template (inference/chat.py), and
# its end-of-turn token is among the EOS ids its manifest records.
SYSTEM = "You are a concise, precise programming assistant."
EXPLAIN_CONFIG = GenerationConfig(max_new_tokens=320)
REFACTOR_CONFIG = GenerationConfig(max_new_tokens=512)
FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|$)", re.DOTALL)
# A sentence's end (its stop and the space or line break after it), a paragraph's end, or a code
# fence at the start of a line.
SENTENCE_OR_FENCE = re.compile(r"[.!?:][)*_`\"']*(?=\s)|\n\s*\n|^[ \t]*```[^\n]*$", re.MULTILINE)


Messages = list[dict[str, str]]


def messages(user: str) -> Messages:
    """Chat messages: sent as they are to a remote endpoint, rendered for the local model."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def explain_messages(code: str, language_id: str) -> Messages:
    lang = fence_name(language_id)
    return messages(
        f"Explain what this {lang} code does, in a few short paragraphs.\n\n```{lang}\n{code}\n```"
    )


def ended_explanation(text: str, cut_off: bool, max_tokens: int) -> str:
    """An explanation the person can read to its end: one the token limit cut off ends at its
    last whole sentence or paragraph (never inside a code block), and says it was cut."""
    if not cut_off:
        return text
    kept = readable_part(text)
    note = f"*(The explanation was cut at the {max_tokens}-token limit.)*"
    return f"{kept}\n\n{note}" if kept else note


def readable_part(text: str) -> str:
    """`text` up to its last whole sentence or paragraph: what is streamed while the rest is
    still being written, so that what the person saw is always the start of the final answer."""
    return text[: _last_sentence_end(text)].rstrip()


def _last_sentence_end(text: str) -> int:
    """Where the last whole sentence or paragraph ends outside a code block (0: none)."""
    end, in_code = 0, False
    for match in SENTENCE_OR_FENCE.finditer(text):
        if match.group().lstrip().startswith("```"):
            in_code = not in_code
            if not in_code:
                end = match.end()  # a whole code block is a whole piece
        elif not in_code:
            end = match.end()
    return end


def refactor_messages(code: str, language_id: str) -> Messages:
    lang = fence_name(language_id)
    return messages(
        f"Rewrite this {lang} code to be clearer without changing what it does. "
        f"Reply with only the rewritten code in one ```{lang} block.\n\n```{lang}\n{code}\n```"
    )


def extract_code(answer: str) -> str | None:
    """The first fenced code block of an answer, or None when the model gave none."""
    match = FENCE.search(answer)
    if match is None:
        return None
    code = match.group(1).rstrip("\n")
    return code if code.strip() else None


def refactor_verdict(
    source: str, selected: str, rewritten: str | None, start: int, end: int, language: str
) -> str | None:
    """Why a rewrite of source[start:end] must not be applied, or None when it is safe to."""
    if rewritten is None:
        return "the model's answer had no code block"
    if rewritten.strip() == selected.strip():
        return "the model returned the code unchanged"
    before = syntax_issues(language, source)
    after = syntax_issues(language, source[:start] + rewritten + source[end:])
    if before is None or after is None:
        return f"no parser for {language!r} to check the rewrite with"
    if len(after) > len(before):
        issue = after[0]
        return f"it would add syntax errors (first at line {issue.line + 1}, column {issue.column + 1})"
    return None
