"""Chat prompts come from the model's own template (recorded in its manifest at build time)."""

from __future__ import annotations

import pytest

from inference.chat import ChatTemplateError, render_chat

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Explain `x = 1`."},
]
# Llama 3's format: another family, other turn markers.
LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def test_models_without_a_recorded_template_get_chatml() -> None:
    assert render_chat(None, CHAT) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nExplain `x = 1`.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_another_family_gets_its_own_turns() -> None:
    assert render_chat(LLAMA3, CHAT) == (
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nExplain `x = 1`.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_a_broken_or_refusing_template_is_a_clear_error() -> None:
    with pytest.raises(ChatTemplateError, match="does not parse"):
        render_chat("{% for m in messages %}", CHAT)
    refusing = "{{ raise_exception('system messages are not supported') }}"
    with pytest.raises(ChatTemplateError, match="not supported"):
        render_chat(refusing, CHAT)
    # The sandbox: a template cannot reach Python internals.
    with pytest.raises(Exception, match=r"unsafe|not safely|access"):
        render_chat("{{ messages.__class__.__mro__[1].__subclasses__() }}", CHAT)
