"""The service's policy on the scripted engine (tests/fake_engine.py): no ONNX, no built model.

Debounce and stale answers, type-through, prefetch, the cold prompt's short answer, fallback,
who gets nothing and why, bad requests, and the chat tasks, each through CompletionService's
public calls as the LSP handlers make them."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path

import numpy as np
import pytest
from lsprotocol import types

from lsp_server.config.tuning import (
    PREFETCH_DEADLINE_S,
    SINGLE_LINE_DEADLINE_S,
    T_ADOPT_GRACE_MS,
)
from lsp_server.errors import BadRequest
from lsp_server.inline.show_gate import FEATURES
from lsp_server.service import CompletionService
from tests.fake_engine import FakeEngine, engine_factory

URI = "file:///w/calc.py"
SOURCE = "def hypot(a, b):\n    return a"
END = (1, len("    return a"))


@pytest.fixture(autouse=True)
def _home(home: Path) -> None:
    """Each service's index and caches live in the test's own empty home."""


def make_service(engine: FakeEngine, **settings: object) -> CompletionService:
    told: list[str] = []
    svc = CompletionService(
        lambda message, level: told.append(message), make_engine=engine_factory(engine)
    )
    svc.told = told  # type: ignore[attr-defined]
    svc.apply_settings(
        {"debounceMs": 0, "prefetch": False, "coldContext": False, "showGate": False, **settings}
    )
    return svc


async def ready(svc: CompletionService, text: str = SOURCE, language: str = "python") -> None:
    await svc.load_models()
    svc.open(URI, text, 1, language)


async def idle(svc: CompletionService) -> None:
    while svc._background or svc.idle.prefill.pending:
        await asyncio.gather(*list(svc._background))
        await svc.idle.prefill.settled()


def type_text(svc: CompletionService, version: int, line: int, character: int, text: str) -> None:
    at = types.Position(line, character)
    svc.change(
        URI, version, [types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)]
    )


async def test_an_answer_comes_from_the_fast_model_on_the_document() -> None:
    engine = FakeEngine(lambda variant, prompt: " * a + b * b")
    svc = make_service(engine)
    await ready(svc)
    answer = await svc.complete(URI, *END)
    assert answer is not None and answer.text == " * a + b * b"
    assert (answer.line, answer.character) == END
    assert [c.variant for c in engine.calls] == ["fast"]
    assert engine.calls[0].prompt.endswith("return a") and engine.calls[0].config.stop_at_newline
    counts = svc.stats()["server"]
    assert counts["requests"] == 1 and counts["answered"] == 1


async def test_a_newer_request_drops_the_older_one_before_the_model_runs() -> None:
    engine = FakeEngine(lambda variant, prompt: " + b")
    svc = make_service(engine, debounceMs=40)
    await ready(svc)
    first = asyncio.ensure_future(svc.complete(URI, *END))
    await asyncio.sleep(0.01)
    second = await svc.complete(URI, *END)
    assert await first is None and second is not None
    assert len(engine.calls) == 1  # the dropped one never reached the model
    stats = svc.stats()
    assert stats["server"]["stale_dropped"] == 1 and stats["emptyReasons"]["stale"] == 1


async def test_an_edit_during_generation_drops_the_answer() -> None:
    engine = FakeEngine(lambda variant, prompt: " + b * b + a * a", s_per_token=0.02)
    svc = make_service(engine)
    await ready(svc)
    pending = asyncio.ensure_future(svc.complete(URI, *END))
    while not engine.calls:  # past the debounce and its staleness check: the model runs
        await asyncio.sleep(0.005)
    type_text(svc, 2, *END, " ")
    assert await pending is None
    stats = svc.stats()
    assert stats["emptyReasons"] == {"stale": 1} and stats["server"]["stale_dropped"] == 1
    assert len(engine.calls) == 1 and stats["models"]["fake/fast"]["cancels"] == 0


async def test_a_cancelled_request_stops_the_decode_loop() -> None:
    engine = FakeEngine(lambda variant, prompt: "x" * 60, s_per_token=0.05)
    svc = make_service(engine)
    await ready(svc)
    pending = asyncio.ensure_future(svc.complete(URI, *END))
    await asyncio.sleep(0.1)
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    await asyncio.sleep(0.2)  # the worker thread sees the flag at its next token
    assert svc.stats()["server"]["cancelled"] == 1
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 1


async def test_typing_through_a_suggestion_needs_no_model() -> None:
    engine = FakeEngine(lambda variant, prompt: "_squared + b")
    svc = make_service(engine)
    await ready(svc)
    assert (await svc.complete(URI, *END)).text == "_squared + b"
    type_text(svc, 2, *END, "_sq")
    answer = await svc.complete(URI, END[0], END[1] + 3)
    assert answer is not None and answer.text == "uared + b"
    assert len(engine.calls) == 1 and svc.stats()["server"]["type_through"] == 1
    type_text(svc, 3, END[0], END[1] + 3, "\u00e9")  # off the suggestion: the model again
    assert (await svc.complete(URI, END[0], END[1] + 4)) is not None
    assert len(engine.calls) == 2
    svc.apply_settings({"typeThrough": False})  # switched off: the model answers even inside one
    shown = svc.documents.get(URI).text
    type_text(svc, 4, END[0], END[1] + 4, "_")
    assert svc.memory.find(URI, shown + "_", len(shown) + 1) is not None
    assert (await svc.complete(URI, END[0], END[1] + 5)) is not None
    assert len(engine.calls) == 3 and svc.stats()["server"]["type_through"] == 1


async def test_a_rest_the_show_gate_holds_back_goes_to_the_model_instead() -> None:
    engine = FakeEngine(lambda variant, prompt: "_squared + b")
    svc = make_service(engine, showGate=True, showGateThreshold=0.3)
    weights = dict.fromkeys(FEATURES, 0.0) | {"bias": 1.0, "typed_through": -10.0}
    svc.show_gate.weights = np.array([weights[f] for f in FEATURES])  # rests are unlikely
    await ready(svc)
    assert (await svc.complete(URI, *END)).text == "_squared + b"  # fresh: likely enough
    type_text(svc, 2, *END, "_sq")
    answer = await svc.complete(URI, END[0], END[1] + 3)
    assert answer is not None and answer.text == "_squared + b"  # the model's, asked again
    stats = svc.stats()
    assert len(engine.calls) == 2 and stats["server"]["held_back"] == 1
    assert "held_back" not in stats["emptyReasons"]  # the request was answered
    assert stats["gate"]["heldBack"] == 1


async def test_asking_again_where_a_suggestion_was_shown_is_not_a_prefetch() -> None:
    """With prefetch off, a suggestion shown here and asked for again at the same place comes
    from memory as itself: counted as shown again, and put to the show gate as no prefetch
    (a gate that holds back every prefetch still shows it)."""
    engine = FakeEngine(lambda variant, prompt: " * a + b * b")
    svc = make_service(engine, showGate=True, showGateThreshold=0.3)
    weights = dict.fromkeys(FEATURES, 0.0) | {"bias": 1.0, "prefetch": -10.0}
    svc.show_gate.weights = np.array([weights[f] for f in FEATURES])
    await ready(svc)
    assert (await svc.complete(URI, *END)).text == " * a + b * b"
    again = await svc.complete(URI, *END)
    assert again is not None and again.text == " * a + b * b"
    server = svc.stats()["server"]
    assert len(engine.calls) == 1  # from memory, not the model
    assert server["shown_again"] == 1 and "prefetch_hits" not in server
    assert "held_back" not in server


async def test_accepting_shows_the_prefetched_suggestion() -> None:
    def script(variant: str, prompt: str) -> str:
        return "\n    return b" if prompt.endswith(" * a") else " * a"

    engine = FakeEngine(script)
    svc = make_service(engine, prefetch=True)
    await ready(svc)
    shown = await svc.complete(URI, *END)
    assert shown is not None and shown.text == " * a"
    await idle(svc)
    assert len(engine.calls) == 2  # the one shown, and the one after it
    assert engine.calls[1].config.deadline_s == PREFETCH_DEADLINE_S  # beside the keys typed
    type_text(svc, 2, *END, shown.text)  # accepted
    after = await svc.complete(URI, END[0], END[1] + len(shown.text))
    assert after is not None and after.text == "\n    return b"
    assert len(engine.calls) == 2 and svc.stats()["server"]["prefetch_hits"] == 1


async def test_the_newline_and_indentation_typed_through_do_not_count_against_the_rest() -> None:
    """Enter types the newline and indentation a next-line suggestion starts with (editors
    indent): the gate judges the rest after them as it judged the whole; what is typed after
    them counts as typed through."""

    def script(variant: str, prompt: str) -> str:
        return "\n    return b" if prompt.endswith(" * a") else " * a"

    engine = FakeEngine(script)
    svc = make_service(engine, prefetch=True, showGate=True, showGateThreshold=0.0)
    puts = []
    put = svc.show_gate.put
    svc.show_gate.put = lambda uri, p: (puts.append(p), put(uri, p))[1]  # type: ignore[method-assign]
    await ready(svc)
    shown = await svc.complete(URI, *END)
    await idle(svc)
    type_text(svc, 2, *END, shown.text)  # accepted
    col = END[1] + len(shown.text)
    assert (await svc.complete(URI, END[0], col)).text == "\n    return b"
    type_text(svc, 3, END[0], col, "\n    ")
    assert (await svc.complete(URI, 2, 4)).text == "return b"
    type_text(svc, 4, 2, 4, "re")
    assert (await svc.complete(URI, 2, 6)).text == "turn b"
    typed = FEATURES.index("typed_through")
    assert [p.x[typed] for p in puts[-3:]] == [0.0, 0.0, math.log1p(2) / 4]


async def test_at_a_finished_line_s_end_the_line_after_it_is_suggested() -> None:
    """Where the model ends the line first (it was done), the suggestion is the next line, its
    newline and indentation with it; where it goes on, the rest of the line only; with
    multiline "never", nothing past this line."""
    engine = FakeEngine(lambda variant, prompt: "\n    return c\n\ndef")
    svc = make_service(engine)
    await ready(svc, "def hypot(a, b):\n    c = a * a + b * b")
    answer = await svc.complete(URI, 1, len("    c = a * a + b * b"))
    assert answer is not None and answer.text == "\n    return c"
    assert engine.calls[0].config.next_line and engine.calls[0].config.stop_at_newline
    engine.script = lambda variant, prompt: " + 1\n    return c"
    type_text(svc, 2, 1, len("    c = a * a + b * b"), " ")
    going_on = await svc.complete(URI, 1, len("    c = a * a + b * b "))
    assert going_on is not None and going_on.text == "+ 1" and engine.calls[-1].config.next_line
    engine.script = lambda variant, prompt: "\n    return c"
    svc.apply_settings(
        {"debounceMs": 0, "prefetch": False, "coldContext": False, "showGate": False}
        | {"multiline": "never"}
    )
    type_text(svc, 3, 1, len("    c = a * a + b * b "), "+ 2")
    assert await svc.complete(URI, 1, len("    c = a * a + b * b + 2")) is None
    assert len(engine.calls) == 3 and not engine.calls[-1].config.next_line


async def test_a_cold_prompt_is_answered_from_the_nearest_lines_then_prefilled_whole() -> None:
    body = "".join(f"value_{i} = {i} * {i}\n" for i in range(200))
    text = body + "total = value_1"
    engine = FakeEngine(lambda variant, prompt: " + value_2", prefill_s_per_token=0.001)
    svc = make_service(engine, coldContext=True, coldPrefillMs=100, contextTokens=1536)
    await ready(svc, text)
    svc.idle.prefill.forget(URI)  # the open-time prefill would warm it first
    line = text.count("\n")
    answer = await svc.complete(URI, line, len("total = value_1"))
    assert answer is not None and answer.text == " + value_2"
    short = engine.calls[0].prompt
    assert svc.stats()["server"]["short_context"] == 1
    await idle(svc)
    assert engine.warmed and len(engine.warmed[-1]) > len(short)  # the whole prompt, after it
    assert engine.warmed[-1].endswith("total = value_1")


@pytest.mark.parametrize("rest_prefill_ms", [0, 5000])
async def test_at_rest_a_request_waits_for_the_whole_prompt(rest_prefill_ms: int) -> None:
    """A person at rest (the document unchanged for a second) gets the whole prompt when its
    prefill fits restPrefillMs, not the nearest lines that coldPrefillMs alone allows."""
    body = "".join(f"value_{i} = {i} * {i}\n" for i in range(200))
    text = body + "total = value_1"
    engine = FakeEngine(lambda variant, prompt: " + value_2", prefill_s_per_token=0.0001)
    svc = make_service(engine, coldContext=True, coldPrefillMs=10, restPrefillMs=rest_prefill_ms)
    await ready(svc, text)
    svc.idle.prefill.forget(URI)  # nothing prefilled: the whole prompt is cold
    svc.documents.get(URI).changed_at -= 2.0  # opened two seconds ago, untouched since
    answer = await svc.complete(URI, text.count("\n"), len("total = value_1"))
    assert answer is not None and answer.text == " + value_2"
    short = svc.stats()["server"].get("short_context", 0)
    assert short == (1 if rest_prefill_ms == 0 else 0)
    whole = len(engine.calls[0].prompt) > 100  # the whole window, not the nearest lines
    assert whole == bool(rest_prefill_ms)
    # The prefill the budget let it spend is added to its deadline, not taken from the answer.
    added_s = engine.calls[0].config.deadline_s - SINGLE_LINE_DEADLINE_S
    assert 0 < added_s <= max(rest_prefill_ms, 10) / 1000
    assert (added_s > 10 / 1000) == whole  # more than coldPrefillMs: the whole prompt's


async def test_a_failing_fast_model_falls_back_to_the_standard_one_and_says_so() -> None:
    engine = FakeEngine(lambda variant, prompt: f" + {variant}", failing=frozenset({"fast"}))
    svc = make_service(engine, preloadStandard=True)
    await ready(svc)
    answer = await svc.complete(URI, *END)
    assert answer is not None and answer.text == " + standard"
    assert any("come from the standard model" in m for m in svc.told)


async def test_no_model_that_can_complete_is_an_error_told_once() -> None:
    engine = FakeEngine(failing=frozenset({"fast"}), missing=frozenset({"standard"}))
    svc = make_service(engine)
    await ready(svc)
    assert await svc.complete(URI, *END) is None
    assert await svc.complete(URI, *END) is None
    assert svc.stats()["server"]["errors"] == 2
    assert sum("no model could complete" in m for m in svc.told) == 1


async def test_who_gets_nothing_and_why() -> None:
    engine = FakeEngine()
    svc = make_service(engine, languages={"markdown": False})
    svc.open(URI, SOURCE, 1, "python")
    assert await svc.complete(URI, *END) is None  # before any model is loaded
    await svc.load_models()
    svc.open("file:///w/notes.md", "# notes", 1, "markdown")
    assert await svc.complete("file:///w/notes.md", 0, 7) is None
    svc.open("file:///w/blob.py", "a\x00b", 1, "python")
    assert await svc.complete("file:///w/blob.py", 0, 3) is None
    assert await svc.complete("file:///w/blob.py", 0, 3) is None
    reasons = svc.stats()["emptyReasons"]
    assert reasons == {"not_ready": 1, "disabled": 1, "refused_binary": 2}
    assert engine.calls == [] and sum("binary data" in m for m in svc.told) == 1  # told once


async def test_bad_requests_say_what_is_wrong_and_lose_nothing() -> None:
    engine = FakeEngine(lambda variant, prompt: "é")
    svc = make_service(engine)
    await ready(svc)
    with pytest.raises(BadRequest, match="unknown document"):
        await svc.complete("file:///w/other.py", 0, 0)
    with pytest.raises(BadRequest):
        await svc.complete(URI, 9, 0)  # past the last line
    assert svc.stats()["server"]["bad_position"] == 1
    with pytest.raises(BadRequest, match=r"expected arguments \[\{uri, range"):
        svc.chat.selection([{"uri": URI}])
    assert (await svc.complete(URI, *END)).text == "é"  # and it goes on serving


async def test_positions_count_utf16_code_units() -> None:
    text = 'name = "𝄞é"\nx = name'

    def script(variant: str, prompt: str) -> str:
        return "[0]" if prompt.endswith("x = name") else "ü" if prompt.endswith('"𝄞') else "?"

    engine = FakeEngine(script)
    svc = make_service(engine)
    await ready(svc, text)
    answer = await svc.complete(URI, 1, 8)
    assert answer is not None and answer.text == "[0]"
    after_pair = await svc.complete(URI, 0, 10)  # 𝄞 (U+1D11E) is two UTF-16 code units
    assert after_pair is not None and after_pair.text == "ü"
    with pytest.raises(BadRequest):
        await svc.complete(URI, 2, 0)


async def test_explain_streams_from_the_standard_model() -> None:
    engine = FakeEngine(
        lambda variant, prompt: "It adds two squares." if "<|im_start|>" in prompt else "x"
    )
    svc = make_service(engine)
    await ready(svc)
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 12}}
    sel = svc.chat.selection([{"uri": URI, "range": whole}])
    seen: list[str] = []
    reply = await svc.chat.explain(sel, seen.append, threading.Event())
    assert reply == {
        "markdown": "It adds two squares.",
        "model": "fake/standard",
        "cancelled": False,
        "cut": False,
    }
    assert seen[-1] == "It adds two squares." and svc.stats()["server"]["explains"] == 1
    cancel = threading.Event()
    cancel.set()  # a cancelled request stops before its first forward pass
    assert (await svc.chat.explain(sel, seen.append, cancel))["cancelled"]


async def test_an_explanation_cut_by_the_token_limit_ends_at_a_sentence_and_says_so() -> None:
    long = "It adds two squares. " * 20 + "Then it returns the list of `Order"
    engine = FakeEngine(lambda variant, prompt: long if "<|im_start|>" in prompt else "x")
    svc = make_service(engine)
    await ready(svc)
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 12}}
    seen: list[str] = []
    sel = svc.chat.selection([{"uri": URI, "range": whole}])
    reply = await svc.chat.explain(sel, seen.append, threading.Event())
    assert reply["cut"] and reply["markdown"].endswith("cut at the 320-token limit.)*")
    assert reply["markdown"].split("\n\n")[0].endswith("It adds two squares.")
    assert seen[-1] == reply["markdown"]  # the streamed view ends as the reply does


async def test_an_automatic_request_chooses_its_model_once_and_encodes_its_prompt_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = FakeEngine(lambda variant, prompt: " * b")
    svc = make_service(engine, coldContext=True)
    await ready(svc)
    await idle(svc)  # the open-time prefill is done before the request is counted
    choices = []
    serving_plan = engine.serving_plan
    monkeypatch.setattr(engine, "serving_plan", lambda *a: choices.append(a) or serving_plan(*a))
    tokenizer = engine.router.loaded("fast").tokenizer
    tokenizer.encoded.clear()
    answer = await svc.complete(URI, *END)
    assert answer is not None and answer.text == " * b"
    prompt = engine.calls[-1].prompt
    assert len(choices) == 1
    assert tokenizer.encoded.count(prompt) == 1  # the pieces are counted, the whole encoded once


QUIET_SOURCE = (
    'def area(r):\n    # the area of a cir\n    label = "circle of radi\n    return 3.14 * r'
)


async def test_quiet_in_comments_and_strings_where_asked_explicit_requests_still_answer() -> None:
    engine = FakeEngine(lambda variant, prompt: "x")
    svc = make_service(engine, quietIn={"*": ["comment"], "python": ["comment", "string"]})
    await ready(svc, QUIET_SOURCE)
    in_comment, in_string, in_code = (1, 21), (2, 27), (3, 18)
    assert await svc.complete(URI, *in_comment) is None
    assert await svc.complete(URI, *in_string) is None
    assert (await svc.complete(URI, *in_code)).text == "x"
    assert (await svc.complete(URI, *in_comment, invoked=True)).text == "x"  # asked for
    reasons = svc.stats()["emptyReasons"]
    assert reasons == {"quiet_comment": 1, "quiet_string": 1}
    firsts = [c for c in engine.calls if c.config.first_choice == 0]
    assert len(firsts) == 2  # the model was never asked where it stays quiet


async def test_quiet_in_is_per_language_with_a_default() -> None:
    engine = FakeEngine(lambda variant, prompt: "x")
    svc = make_service(engine, quietIn={"*": ["comment", "string"], "python": []})
    await ready(svc, QUIET_SOURCE)
    assert (await svc.complete(URI, 1, 21)).text == "x"  # python: everywhere
    svc.apply_settings({"quietIn": {"python": ["string"]}})
    assert (await svc.complete(URI, 1, 21)).text == "x"
    assert await svc.complete(URI, 2, 27) is None
    svc.apply_settings({"quietIn": {"python": ["strings"]}})  # a typo is refused, the rest kept
    assert any("quietIn" in m for m in svc.told)
    assert await svc.complete(URI, 2, 27) is None


async def test_a_suggestion_passed_over_again_and_again_is_held_back_until_the_code_changes() -> (
    None
):
    engine = FakeEngine(lambda variant, prompt: " * b")
    svc = make_service(engine, rejectAfterShows=3)
    await ready(svc)
    here, elsewhere = END, (0, len("def hypot(a, b):"))
    for _ in range(4):  # asking again at the same place is not passing it over
        assert await svc.complete(URI, *here) is not None
    for _ in range(2):  # shown here, then the person goes elsewhere: passed over
        assert await svc.complete(URI, *elsewhere) is not None
        assert await svc.complete(URI, *here) is not None
    assert await svc.complete(URI, *elsewhere) is not None  # passed over a third time
    assert await svc.complete(URI, *here) is None
    assert svc.stats()["emptyReasons"]["rejected_here"] == 1
    assert (await svc.complete(URI, *here, invoked=True)).text == " * b"  # asked for: answered
    type_text(svc, 2, 0, 0, "import math\n")  # the code around it changed: offered again
    assert await svc.complete(URI, here[0] + 1, here[1]) is not None
    svc.accepted([{"uri": URI, "model": "fake/fast", "chars": 4}])  # taken: counting starts over
    assert await svc.complete(URI, 1, len("def hypot(a, b):")) is not None


async def test_typing_a_suggestion_is_not_passing_it_over() -> None:
    engine = FakeEngine(lambda variant, prompt: "_squared")
    svc = make_service(engine, rejectAfterShows=1)
    await ready(svc)
    assert await svc.complete(URI, *END) is not None
    type_text(svc, 2, *END, "_s")  # typed through, then on to a new line
    assert (await svc.complete(URI, END[0], END[1] + 2)).text == "quared"
    assert svc.stats()["emptyReasons"].get("rejected_here", 0) == 0


async def test_a_new_answer_source_is_one_class_and_one_line_as_the_architecture_shows() -> None:
    """docs/architecture.md's example source, taken from the page as written: one class, one
    line in the chain, and the server answers from it (through the LSP handler's items too)."""
    import re

    from lsp_server.protocol.server import inline_items

    page = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    section = page.split("### Adding an answer source", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict[str, object] = {}
    exec(compile(source, "library.py", "exec"), namespace)
    engine = FakeEngine(lambda variant, prompt: " + b")
    svc = make_service(engine)
    await ready(svc)
    chain = svc.inline.chain
    library = namespace["FromLibrary"]({"return a": " * a + b * b"})  # type: ignore[operator]
    svc.inline.chain = (*chain[:3], library, *chain[3:])  # the one line
    answer = await svc.complete(URI, *END)
    assert answer is not None and answer.text == " * a + b * b" and engine.calls == []
    items = inline_items(URI, answer)
    assert items[0].insert_text == " * a + b * b" and items[0].command.arguments[0]["model"] is None
    other = "def f():\n    return b"
    svc.open("file:///w/other.py", other, 1, "python")
    assert (await svc.complete("file:///w/other.py", 1, 12)).text == " + b"  # passed: the model


async def _writing(engine: FakeEngine, svc: CompletionService) -> asyncio.Future:
    """An automatic request at END whose answer the model is still writing."""
    pending = asyncio.ensure_future(svc.complete(URI, *END))
    while not engine.calls:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)  # a few characters written
    return pending


async def test_typing_what_the_model_is_writing_takes_its_answer_over() -> None:
    """The editor cancels the older request as it sends the next key's; the newer one waits for
    the answer being written instead of starting again, and shows its rest."""
    engine = FakeEngine(lambda variant, prompt: " * a + b * b", s_per_token=0.02)
    svc = make_service(engine)
    await ready(svc)
    first = await _writing(engine, svc)
    type_text(svc, 2, *END, " ")  # what the model is writing
    first.cancel()
    answer = await svc.complete(URI, END[0], END[1] + 1)
    with pytest.raises(asyncio.CancelledError):
        await first
    assert answer is not None and answer.text == "* a + b * b"
    assert len(engine.calls) == 1 and svc.stats()["server"]["in_flight_hits"] == 1
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 0
    type_text(svc, 3, END[0], END[1] + 1, "*")  # and its rest is remembered for type-through
    assert (await svc.complete(URI, END[0], END[1] + 2)).text == " a + b * b"
    assert len(engine.calls) == 1


async def test_the_line_after_one_typed_through_is_written_before_its_end() -> None:
    """A run taken over while the person types is followed by the line after it, computed while
    they type the rest of this one: at the line's end it shows without a model run."""

    def script(variant: str, prompt: str) -> str:
        return "\n    return c\n\ndef" if prompt.endswith("a + b * b") else " * a + b * b"

    engine = FakeEngine(script, s_per_token=0.02)
    svc = make_service(engine, prefetch=True)
    await ready(svc)
    first = await _writing(engine, svc)
    type_text(svc, 2, *END, " ")
    first.cancel()
    taken = await svc.complete(URI, END[0], END[1] + 1)
    assert taken is not None and taken.text == "* a + b * b"
    await idle(svc)
    assert len(engine.calls) == 2  # the one taken over, and the line after it
    type_text(svc, 3, END[0], END[1] + 1, taken.text)  # typed to the line's end
    after = await svc.complete(URI, END[0], END[1] + 1 + len(taken.text))
    assert after is not None and after.text == "\n    return c"
    assert len(engine.calls) == 2 and svc.stats()["server"]["prefetch_hits"] == 1


async def test_a_request_on_the_way_to_the_prefetched_place_lets_the_prefetch_finish() -> None:
    """A request that goes to the model while the person types the shown suggestion (a rest the
    gate held back, an explicit ask) leaves the line after it being computed; one elsewhere
    stops it."""

    def script(variant: str, prompt: str) -> str:
        if prompt.endswith("a * a"):
            return "\n    return c"
        return "" if prompt.endswith(" *") else " * a"

    engine = FakeEngine(script, s_per_token=0.05)
    svc = make_service(engine, prefetch=True)
    await ready(svc)
    shown = await svc.complete(URI, *END)
    assert shown is not None and shown.text == " * a"
    while len(engine.calls) < 2:  # the prefetch is being written
        await asyncio.sleep(0.005)
    type_text(svc, 2, *END, " *")
    # On the way there, and to the model (as a rest the show gate held back goes): it answers
    # nothing here, so nothing is prefetched after it.
    assert await svc.complete(URI, END[0], END[1] + 2, invoked=True) is None
    type_text(svc, 3, END[0], END[1] + 2, " a")
    after = await svc.complete(URI, END[0], END[1] + len(shown.text))
    assert after is not None and after.text == "\n    return c"
    assert svc.stats()["server"]["prefetch_hits"] == 1
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 0
    calls = len(engine.calls)
    snap = svc.snapshot(URI)
    svc.idle.prefetch_after(snap.uri, snap.version, snap.text, after, snap)
    while len(engine.calls) == calls:
        await asyncio.sleep(0.005)
    await svc.complete(URI, 0, 3, invoked=True)  # elsewhere: the prefetch stops
    await idle(svc)
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 1


async def test_typing_something_else_stops_the_answer_being_written() -> None:
    engine = FakeEngine(lambda variant, prompt: " * a + b * b", s_per_token=0.02)
    svc = make_service(engine)
    await ready(svc)
    first = await _writing(engine, svc)
    type_text(svc, 2, *END, ";")
    first.cancel()
    await svc.complete(URI, END[0], END[1] + 1)
    assert len(engine.calls) == 2 and "in_flight_hits" not in svc.stats()["server"]
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 1


async def test_a_cancelled_request_nobody_takes_over_stops_after_the_grace() -> None:
    engine = FakeEngine(lambda variant, prompt: "x" * 60, s_per_token=0.02)
    svc = make_service(engine)
    await ready(svc)
    first = await _writing(engine, svc)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.sleep(T_ADOPT_GRACE_MS / 1000 + 0.1)  # the grace, then the next token
    assert svc.stats()["models"]["fake/fast"]["cancels"] == 1
