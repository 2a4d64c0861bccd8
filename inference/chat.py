"""Chat prompts in the model's own format: the Jinja chat template its manifest records.

Rendered as transformers renders chat templates (a sandboxed Jinja environment, trim_blocks and
lstrip_blocks), so a model built from any family gets the turns it was trained on.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from inference.errors import ModelFailure

# For models whose manifest records no template (built before it was recorded): SmolLM2's ChatML.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ChatTemplateError(ModelFailure):
    """The model's chat template cannot render these messages: a fault of the model's files, so
    another model may serve."""


@cache
def _compiled(template: str) -> Any:
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ChatTemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template)
    except TemplateError as exc:
        raise ChatTemplateError(f"the model's chat template does not parse: {exc}") from exc


def render_chat(template: str | None, messages: list[dict[str, str]]) -> str:
    """The prompt for `messages`, ending where the assistant's answer begins."""
    return _compiled(template or CHATML).render(
        messages=messages, add_generation_prompt=True, bos_token="", eos_token=""
    )
