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


Messages = list[dict[str, str]]


def messages(user: str) -> Messages:
    """Chat messages: sent as they are to a remote endpoint, rendered for the local model."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def render_chatml(chat: Messages) -> str:
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat)
    return turns + "<|im_start|>assistant\n"


def explain_messages(code: str, language_id: str) -> Messages:
    lang = fence_name(language_id)
    return messages(f"Explain what this {lang} code does.\n\n```{lang}\n{code}\n```")


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
