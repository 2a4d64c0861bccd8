"""The plain functions behind the LSP handlers: positions, settings, completion plans, scheduling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from inference.generate import Finish, Generation, GenerationConfig
from inference.model import load_model_dir
from lsp_server.chat.prompts import extract_code, refactor_verdict
from lsp_server.completion.plan import is_single_line, plan_completion
from lsp_server.completion.postprocess import postprocess
from lsp_server.config.settings import Settings, merge
from lsp_server.config.tuning import WINDOW_STEP_LINES
from lsp_server.prompting.context import window_start
from lsp_server.serving.scheduler import Gate, LatestWins
from lsp_server.text.positions import PositionError, offset_at, utf16_to_index


def test_utf16_positions_with_surrogate_pairs() -> None:
    line = 'x = "👋é"'  # 👋 is 2 UTF-16 units, é is 1
    assert utf16_to_index(line, 5) == 5  # just before the emoji
    assert utf16_to_index(line, 7) == 6  # after the emoji's two units
    assert utf16_to_index(line, 9) == len(line)  # 8 code points, 9 UTF-16 units
    assert utf16_to_index(line, 99) == len(line)  # past the end: the end (LSP)
    text = "a\r\nbé\n👋z\rlast"
    assert text[offset_at(text, 2, 2) :] == "z\rlast"
    assert text[offset_at(text, 1, 2) :].startswith("\n")  # CR is not part of the line
    assert text[offset_at(text, 3, 0) :] == "last"  # a lone CR ends a line too (LSP)
    assert text[offset_at(text, 0, 9) :] == "\r\nbé\n👋z\rlast"
    with pytest.raises(PositionError, match="line 4 is past the end of the document"):
        offset_at(text, 4, 0)


def test_settings_keep_previous_values_on_bad_input() -> None:
    settings, errors = merge(Settings(), {"fastcomplete": {"fastMode": False, "maxTokens": 9999}})
    assert settings.fastMode is False and settings.maxTokens == 64
    assert errors == ["fastcomplete.maxTokens: must be from 1 to 512; keeping 64"]
    settings, errors = merge(settings, {"languages": {"markdown": False}, "bogus": 1})
    assert not settings.enabled_for("markdown") and settings.enabled_for("python")
    assert errors == ["fastcomplete.bogus: unknown setting (ignored)"]
    assert merge(settings, "nonsense")[1][0].startswith("fastcomplete settings must be an object")
    assert merge(settings, {"enable": "yes"})[0].enable is True
    assert merge(settings, {"debounceMs": True})[1]  # booleans are not numbers


@pytest.mark.parametrize(
    ("prefix", "suffix", "mode", "single"),
    [
        ("    return x +", "", "auto", True),  # mid-statement: the rest of the line
        ("foo(", ")", "auto", True),  # text right of the cursor: one line
        ("def f(x):", "", "auto", False),  # after a block opener: a block
        ("    ", "", "auto", False),  # an empty line: a block
        ("def f(x):", "", "never", True),
        ("x = 1", "", "always", False),
    ],
)
def test_single_or_multi_line(prefix: str, suffix: str, mode: str, single: bool) -> None:
    assert is_single_line(prefix, suffix, mode) is single


def test_window_start_moves_in_coarse_steps() -> None:
    lines = ["x = 1"] * 5000
    starts = {window_start(lines, cursor, 1000, len) for cursor in range(3000, 3060)}
    assert len(starts) <= 2  # 60 lines typed: the prompt start barely moves
    assert all(start % WINDOW_STEP_LINES == 0 for start in starts)
    assert window_start(lines, 10, 10_000, len) == 0


def test_plan_and_clean() -> None:
    text = "def add(a, b):\n    return (a + b)\n"
    plan = plan_completion(text, 1, 15, Settings(), language_id="python", path="pkg/add.py")
    assert plan.prompt == "# pkg/add.py\ndef add(a, b):\n    return (a +"
    assert plan.site.single_line and plan.site.line_suffix == " b)"
    assert not plan.config.heal  # the cursor is not inside a word
    assert postprocess(" b)  \n", plan.site) == ""  # only what is already there: nothing
    assert postprocess(" c + b)", plan.site) == " c +"
    block = plan_completion(text, 0, 14, Settings())
    assert not block.site.single_line and block.config.stop_strings == ("\n\n\n",)
    inside = plan_completion("x = pri", 0, 7, Settings())
    assert inside.config.heal


def test_extract_code_and_refactor_verdicts() -> None:
    assert extract_code("Sure:\n```python\nx = 1\n```\nDone") == "x = 1"
    assert extract_code("no code here") is None
    source = "def f():\n    return 1\n"
    span = (0, len("def f():\n    return 1"))
    ok = refactor_verdict(source, source.strip(), "def f():\n    return 2", *span, "python")
    assert ok is None
    broken = refactor_verdict(source, source.strip(), "def f(:\n    return 2", *span, "python")
    assert broken is not None and "syntax errors" in broken
    assert "no code block" in refactor_verdict(source, "x", None, *span, "python")
    assert "no parser" in refactor_verdict(source, "x", "y = 1", *span, "cobol")


def test_latest_wins_cancels_the_previous_request() -> None:
    latest = LatestWins()
    first = latest.begin("file:///a.py")
    other = latest.begin("file:///b.py")
    second = latest.begin("file:///a.py")
    assert first.cancel.is_set() and not second.cancel.is_set() and not other.cancel.is_set()
    assert not latest.is_current(first) and latest.is_current(second)
    latest.finish(first)  # a stale finish does not remove the newer ticket
    assert latest.is_current(second)


def test_completions_preempt_background_generation(tiny_model: Path) -> None:
    model = load_model_dir(tiny_model / "standard")
    gate = Gate()
    cancel = threading.Event()
    explain = Generation(
        model,
        list(range(100, 140)),
        GenerationConfig(max_new_tokens=200),
        cancel,
        pause=gate.pauser(cancel),
    )
    with gate.foreground():  # a completion is running
        worker = threading.Thread(target=explain.run)
        worker.start()
        time.sleep(0.3)
        assert explain.result.forward_passes == 0  # waiting between steps, not computing
    worker.join(timeout=30)
    assert explain.result.finish is Finish.LENGTH and explain.result.new_tokens == 200
