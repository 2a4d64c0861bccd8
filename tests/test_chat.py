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


# -- an explanation that ends -------------------------------------------------------------------

from lsp_server.chat.prompts import ended_explanation  # noqa: E402

NOTE = "*(The explanation was cut at the 320-token limit.)*"


def test_a_finished_explanation_is_left_as_it_is() -> None:
    text = "It sums the list of `Order"  # ended by the model itself: not ours to trim
    assert ended_explanation(text, False, 320) == text


def test_a_cut_explanation_ends_at_its_last_whole_sentence_and_says_so() -> None:
    text = "It sums the prices.\n\nThe function returns the list of `Order"
    assert ended_explanation(text, True, 320) == f"It sums the prices.\n\n{NOTE}"
    text = "It reads `cfg.path` first. Then it returns the list of `Order"
    assert ended_explanation(text, True, 320) == f"It reads `cfg.path` first.\n\n{NOTE}"


def test_a_cut_explanation_never_ends_inside_a_code_block() -> None:
    text = "It works like this:\n\n```python\nx = load(path). \ny = x.sum("
    assert ended_explanation(text, True, 320) == f"It works like this:\n\n{NOTE}"
    closed = "Like this:\n```python\nx = 1\n```\nand then it stops wi"
    assert ended_explanation(closed, True, 320) == f"Like this:\n```python\nx = 1\n```\n\n{NOTE}"


def test_a_cut_explanation_with_no_whole_sentence_is_just_the_note() -> None:
    assert ended_explanation("The function returns the list of `Order", True, 320) == NOTE


def test_what_streams_is_always_the_start_of_the_final_explanation() -> None:
    from lsp_server.chat.prompts import readable_part

    answer = "It sums the prices. Then it rounds them.\n\nIt returns the list of `Order"
    streamed = [readable_part(answer[:n]) for n in range(len(answer) + 1)]
    final = ended_explanation(answer, True, 320)
    assert all(final.startswith(s) for s in streamed)
    assert streamed[-1] == "It sums the prices. Then it rounds them."
