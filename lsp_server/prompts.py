"""Prompts for the standard model's chat tasks (explain, refactor) and reading its answers."""

from __future__ import annotations

import re

from inference.generate import GenerationConfig
from lsp_server.syntax import fence_name

# SmolLM2-Instruct's chat format (ChatML).
SYSTEM = "You are a concise, precise programming assistant."
EXPLAIN_CONFIG = GenerationConfig(max_new_tokens=320, stop_strings=("<|im_end|>",))
REFACTOR_CONFIG = GenerationConfig(max_new_tokens=512, stop_strings=("<|im_end|>",))
FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|$)", re.DOTALL)


def chat(user: str) -> str:
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def explain_prompt(code: str, language_id: str) -> str:
    lang = fence_name(language_id)
    return chat(f"Explain what this {lang} code does.\n\n```{lang}\n{code}\n```")


def refactor_prompt(code: str, language_id: str) -> str:
    lang = fence_name(language_id)
    return chat(
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
