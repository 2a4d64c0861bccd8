"""Server behaviour without (or before) working models, and settings handling."""

from __future__ import annotations

import asyncio

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import SERVER_HOME, command, config, inline, open_doc, start

MISSING = f"{SERVER_HOME}/no-such-model"


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient):
    await start(
        lsp_client,
        {
            "fastModelPath": f"{MISSING}/fast",
            "standardModelPath": f"{MISSING}/standard",
            "maxTokens": 0,
            "multiline": "sometimes",
        },
    )
    yield
    await lsp_client.shutdown_session()


async def test_missing_models_are_reported_and_the_server_stays_up(
    client: LanguageClient,
) -> None:
    for _ in range(50):
        if any("models build" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.1)
    errors = [m for m in client.messages if m.type == types.MessageType.Error]
    assert errors and all("fastcomplete models build" in m.message for m in errors)
    assert len(errors) == 1  # one message for both models, once
    assert "fast model" in errors[0].message and "standard model" in errors[0].message
    uri = "file:///work/a.py"
    open_doc(client, uri, "def f():\n    return 1\n")
    assert not (await inline(client, uri, 1, 12)).items
    stats = await command(client, "fastcomplete.stats")
    assert stats["modelsReady"] is False and stats["server"]["not_ready"] == 1
    assert stats["emptyReasons"] == {"not_ready": 1} and stats["state"] == "error"
    states = [s["state"] for s in client.statuses]
    assert states == ["loading", "error"] and "models build" in client.statuses[-1]["message"]


async def test_invalid_initialization_options_name_the_key(client: LanguageClient) -> None:
    messages = [m.message for m in client.messages]
    assert any("fastcomplete.maxTokens" in m and "keeping 64" in m for m in messages)
    assert any("fastcomplete.multiline" in m and "keeping 'auto'" in m for m in messages)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fastcomplete": {"fastMode": False}})
    )
    await asyncio.sleep(0.2)
    assert (await command(client, "fastcomplete.stats"))["fastMode"] is False


async def test_the_settings_an_editor_sent_are_kept_for_doctor(client: LanguageClient) -> None:
    import json
    from pathlib import Path

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fastcomplete": {"debounceMs": 77}})
    )
    await command(client, "fastcomplete.stats")  # the notification before it was handled
    seen = json.loads((Path(SERVER_HOME) / "editors.json").read_text())
    settings = seen["an LSP client"]["settings"]
    assert settings["debounceMs"] == 77 and settings["fastModelPath"] == f"{MISSING}/fast"
    assert "maxTokens" not in settings  # refused, so still the default: nothing to report
