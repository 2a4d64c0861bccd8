"""`fastcomplete serve` driven end to end by a real LSP client (pytest-lsp) on the real models."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from lsp_server.text.syntax import syntax_issues
from tests.lsp.helpers import (
    command,
    config,
    explain_reports,
    inline,
    insert,
    model_options,
    open_doc,
    start,
    wait_ready,
)

pytestmark = pytest.mark.real_model

URI = "file:///work/inventory.py"
SOURCE = (
    "import json\n"
    "from pathlib import Path\n\n\n"
    "def load_items(path: Path) -> list[dict]:\n"
    '    """Read the items from a JSON file."""\n'
    "    with path.open() as fh:\n"
    "        data = json.load(fh)\n"
    '    return data["items"]\n\n\n'
    "def total_price(items: list[dict]) -> float:\n"
    "    total = 0.0\n"
    "    for item in items:\n"
    "        total += item"
)


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    await start(lsp_client, model_options(real_model))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


def _end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2


async def test_inline_completion_comes_from_the_fast_model(client: LanguageClient) -> None:
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert set(caps.execute_command_provider.commands) >= {
        "fastcomplete.explain",
        "fastcomplete.refactor",
        "fastcomplete.toggleFastMode",
        "fastcomplete.stats",
        "fastcomplete.accepted",
    }
    client.workspace_did_change_configuration(  # no suggestion computed ahead: one model run
        types.DidChangeConfigurationParams(settings={"fastcomplete": {"prefetch": False}})
    )
    open_doc(client, URI, SOURCE)
    result = await inline(client, URI, *_end(SOURCE))
    assert result.items, "the model produced nothing"
    item = result.items[0]
    assert item.insert_text.strip() and "\n" not in item.insert_text  # mid-statement: one line
    assert item.range.start == item.range.end == types.Position(*_end(SOURCE))
    assert item.command.command == "fastcomplete.accepted"
    await command(client, item.command.command, *item.command.arguments)
    stats = await command(client, "fastcomplete.stats")
    assert stats["models"]["smollm2-135m/fast"]["requests"] == 1
    assert "smollm2-135m/standard" not in stats["models"]
    assert stats["server"]["answered"] == 1 and stats["server"]["accepted"] == 1


async def test_typing_burst_leaves_only_the_last_request_answered(client: LanguageClient) -> None:
    # Keys 30 ms apart, a 150 ms server debounce: every request but the last is superseded.
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fastcomplete": {"debounceMs": 150}})
    )
    open_doc(client, URI, SOURCE)
    typed = '["price"] * item["quantity"]'
    line, char = _end(SOURCE)
    futures, ids = [], []
    for i, ch in enumerate(typed[:20]):
        insert(client, URI, 2 + i, line, char + i, ch)
        msg_id = f"burst-{i}"
        if ids:
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=ids[-1]))
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line, char + i + 1),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        futures.append(
            client.protocol.send_request(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
            )
        )
        ids.append(msg_id)
        await asyncio.sleep(0.03)  # a fast typist
    outcomes = []
    for fut in futures:
        try:
            outcomes.append(await asyncio.wrap_future(fut))
        except JsonRpcException as exc:
            outcomes.append(exc)
    answered = [i for i, o in enumerate(outcomes) if not isinstance(o, Exception) and o.items]
    assert answered == [19]
    stats = await command(client, "fastcomplete.stats")  # still responsive
    server = stats["server"]
    assert server["requests"] >= 1 and server["answered"] == 1
    assert server.get("cancelled", 0) + server.get("stale_dropped", 0) >= 1


async def test_toggling_fast_mode_switches_the_model(client: LanguageClient) -> None:
    client.workspace_did_change_configuration(  # no suggestion computed ahead: one model run
        types.DidChangeConfigurationParams(settings={"fastcomplete": {"prefetch": False}})
    )
    open_doc(client, URI, SOURCE)
    assert await command(client, "fastcomplete.toggleFastMode") == {"fastMode": False}
    await inline(client, URI, *_end(SOURCE))
    stats = await command(client, "fastcomplete.stats")
    assert stats["fastMode"] is False
    assert stats["models"]["smollm2-135m/standard"]["requests"] == 1
    assert "smollm2-135m/fast" not in stats["models"]
    assert await command(client, "fastcomplete.toggleFastMode") == {"fastMode": True}


async def test_explain_streams_progress_from_the_standard_model(client: LanguageClient) -> None:
    open_doc(client, URI, SOURCE)
    selection = {"start": {"line": 4, "character": 0}, "end": {"line": 8, "character": 23}}
    result = await command(client, "fastcomplete.explain", {"uri": URI, "range": selection})
    assert result["model"] == "smollm2-135m/standard" and result["markdown"].strip()
    reports = explain_reports(client)
    assert len(reports) >= 3, "explanation was not streamed"
    assert reports[-1].message == result["markdown"]


async def test_refactor_applies_only_code_that_parses(client: LanguageClient) -> None:
    text = "def add(a, b):\n    result = a + b\n    return result\n"
    open_doc(client, "file:///work/add.py", text)
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 17}}
    result = await command(
        client, "fastcomplete.refactor", {"uri": "file:///work/add.py", "range": selection}
    )
    assert result["model"] == "smollm2-135m/standard"
    if result["applied"]:
        (edit,) = client.applied_edits
        (change,) = edit.edit.changes["file:///work/add.py"]
        assert syntax_issues("python", change.new_text + "\n") == []
    else:
        assert not client.applied_edits
        assert any("not applied" in m.message for m in client.messages)


async def test_code_action_offers_the_rewrite(client: LanguageClient) -> None:
    open_doc(client, URI, SOURCE)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            range=types.Range(types.Position(4, 0), types.Position(8, 10)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    (action,) = actions
    # lsprotocol's client-side hook reads any code action that carries a command as a bare
    # Command (its `command` then holds the nested command, stringified), dropping `kind`.
    assert "'command': 'fastcomplete.refactor'" in str(action.command)
    assert "Rewrite" in action.title


async def test_bad_input_gets_clear_errors_and_the_server_lives(client: LanguageClient) -> None:
    with pytest.raises(JsonRpcException, match="unknown document"):
        await inline(client, "file:///nowhere.py", 0, 0)
    open_doc(client, URI, SOURCE)
    with pytest.raises(JsonRpcException, match="past the end"):
        await inline(client, URI, 999, 0)
    clamped = await inline(client, URI, 0, 500)  # LSP: past a line's end means its end
    assert all(item.range.start == types.Position(0, 11) for item in clamped.items)
    with pytest.raises(JsonRpcException, match="expected arguments"):
        await command(client, "fastcomplete.explain", "not a selection")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"fastcomplete": {"maxTokens": "lots", "debounceMs": 5}}
        )
    )
    await asyncio.sleep(0.3)
    assert any("fastcomplete.maxTokens" in m.message for m in client.messages)
    assert (await command(client, "fastcomplete.stats"))["modelsReady"]
    assert (await inline(client, URI, *_end(SOURCE))).items  # still serving


async def test_non_ascii_positions_are_utf16(client: LanguageClient) -> None:
    text = 'greeting = "héllo wörld"\nname = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"\nprint("👋", gre'
    uri = "file:///work/unicode.py"
    open_doc(client, uri, text)
    # Line 2 is 14 code points but 15 UTF-16 units (the emoji is a surrogate pair): the end of
    # the line is character 15, which a code-point server would take for 16 code points.
    assert len('print("👋", gre') == 14
    result = await inline(client, uri, 2, 15)
    assert result.items and result.items[0].range.start == types.Position(2, 15)
    assert result.items[0].insert_text.startswith("eting")  # `greeting`, from the line above
    past = await inline(client, uri, 2, 16)  # one past the end: clamped to the end (LSP)
    assert all(item.range.start == types.Position(2, 15) for item in past.items)


async def test_cancelling_explain_stops_the_generation(client: LanguageClient) -> None:
    """pygls does not cancel executeCommand handlers; the server's own protocol class does."""
    open_doc(client, URI, SOURCE)
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 14, "character": 0}}
    params = types.ExecuteCommandParams(
        command="fastcomplete.explain", arguments=[{"uri": URI, "range": selection}]
    )
    started = asyncio.get_running_loop().time()
    future = client.protocol.send_request(
        types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="explain-to-cancel"
    )
    await asyncio.sleep(0.8)  # the explanation is streaming by now
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="explain-to-cancel"))
    with contextlib.suppress(JsonRpcException):  # the client is told -32800 at once...
        await asyncio.wait_for(asyncio.wrap_future(future), timeout=10)
    for _ in range(50):  # ...and the generation itself stops within a decode step
        standard = (await command(client, "fastcomplete.stats"))["models"]["smollm2-135m/standard"]
        if standard["cancels"]:
            break
        await asyncio.sleep(0.1)
    assert standard["cancels"] == 1
    assert standard["new_tokens"] < 320  # stopped well before the explanation's token limit
    assert asyncio.get_running_loop().time() - started < 8


async def test_opening_a_document_warms_the_kv_cache(client: LanguageClient) -> None:
    open_doc(client, URI, SOURCE)
    for _ in range(50):
        stats = await command(client, "fastcomplete.stats")
        if stats["events"].get("warmups"):
            break
        await asyncio.sleep(0.1)
    assert stats["events"]["warmups"] >= 1 and stats["events"]["warmup_tokens"] > 50
    await inline(client, URI, *_end(SOURCE))
    fast = (await command(client, "fastcomplete.stats"))["models"]["smollm2-135m/fast"]
    assert (
        fast["reused_tokens"] >= fast["prompt_tokens"] - 10
    )  # the first keystroke paid no prefill


# -- `fastcomplete complete` runs the editor's pipeline -----------------------------------------

CLI_SOURCE = '''import json
from pathlib import Path


def load_settings(path: Path) -> dict:
    """Read the settings file, or the defaults when there is none."""
    if not path.exists():
        return {"theme": "dark", "font_size": 12}
    with path.open() as fh:
        return json.load(fh)


def save_settings(path: Path, settings: dict) -> None:
    with path.open("w") as fh:
        json.dump(settings, fh, indent=2)


def font_size(path: Path) -> int:
    settings = load_settings(path)
    return settings.get("font_size", 12)
'''
# Inside `def font_size` after `settings = load_settings(`: the rest of that line deleted, as a
# person typing it would have it.
CLI_LINE, CUT = 18, "    settings = load_settings("


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = CLI_SOURCE.split("\n")
    assert lines[CLI_LINE].startswith(CUT)
    lines[CLI_LINE] = CUT
    path = tmp_path_factory.mktemp("cli") / "settings_store.py"
    path.write_text("\n".join(lines))
    return path


def _cli(document: Path, real_model: Path) -> dict:
    env = {**os.environ, "FASTCOMPLETE_HOME": str(real_model.parent.parent)}
    env["FASTCOMPLETE_MODEL"] = real_model.name
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lsp_server.cli",
            "complete",
            str(document),
            "--json",
            "--line",
            str(CLI_LINE),
            "--character",
            str(len(CUT)),
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)


async def test_complete_gives_what_the_editor_shows(
    client: LanguageClient, document: Path, real_model: Path
) -> None:
    uri = document.resolve().as_uri()
    open_doc(client, uri, document.read_text())
    served = await inline(client, uri, CLI_LINE, len(CUT))
    cli = _cli(document, real_model)
    assert cli["text"], cli  # a real completion, not an agreement on nothing
    assert served.items and served.items[0].insert_text == cli["text"]
    assert cli["model"] == f"{real_model.name}/fast" and cli["finish"] != "deadline"
    for field in ("ttft_ms", "tpot_ms", "prompt_tokens", "reused_tokens", "new_tokens"):
        assert field in cli
    # The idle warm-up put the whole prompt in the KV cache: the request feeds one token.
    assert cli["reused_tokens"] == cli["prompt_tokens"] - 1 and cli["trimmed_tokens"] == 0


# -- answers before the model: the cursor's prompt warmed, type-through, the next suggestion ----


async def _stat(client: LanguageClient, key: str, at_least: int = 1) -> dict:
    for _ in range(100):
        stats = await command(client, "fastcomplete.stats")
        if stats["server"].get(key, 0) >= at_least or stats["events"].get(key, 0) >= at_least:
            return stats
        await asyncio.sleep(0.1)
    raise AssertionError(f"{key} never reached {at_least}: {stats}")


async def test_focus_type_through_and_the_next_suggestion(client: LanguageClient) -> None:
    assert [s["state"] for s in client.statuses][:2] == ["loading", "ready"]
    open_doc(client, URI, SOURCE)
    end = _end(SOURCE)
    await asyncio.sleep(0.5)  # the open-time warm-up of the file's end, then the cursor rests:
    warmed = (await command(client, "fastcomplete.stats"))["events"].get("warmups", 0)
    focus = {"textDocument": {"uri": URI}, "position": {"line": 4, "character": 10}}
    client.protocol.notify("fastcomplete/didFocus", focus)
    stats = await _stat(client, "warmups", warmed + 1)  # a warm-up for the cursor's prompt
    assert stats["server"]["focus"] == 1
    client.protocol.notify("fastcomplete/didFocus", {"textDocument": 5})
    for _ in range(50):
        if any("malformed fastcomplete/didFocus" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.1)
    assert any("malformed fastcomplete/didFocus" in m.message for m in client.messages)

    shown = (await inline(client, URI, *end)).items[0].insert_text
    assert len(shown) > 1, shown
    insert(client, URI, 2, *end, shown[0])  # the user types the first character shown
    rest = await inline(client, URI, end[0], end[1] + 1)
    assert rest.items and rest.items[0].insert_text == shown[1:]
    assert (await _stat(client, "type_through"))["server"]["type_through"] == 1
    runs = (await _stat(client, "prefetched"))["models"]["smollm2-135m/fast"]["requests"]
    insert(client, URI, 3, end[0], end[1] + 1, shown[1:])  # ...and accepts the rest
    after = await inline(client, URI, end[0], end[1] + len(shown))
    stats = await command(client, "fastcomplete.stats")
    assert after.items and stats["server"]["prefetch_hits"] == 1
    assert stats["models"]["smollm2-135m/fast"]["requests"] == runs  # no model run for it
