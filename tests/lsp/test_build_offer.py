"""A client that offers to build a missing model (the VS Code extension) gets one notification,
its own offer: the server reports the missing default model in its status only."""

from __future__ import annotations

import asyncio

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import config, start


@pytest_lsp.fixture(config=config(FASTCOMPLETE_MODEL="no-such-model"))
async def client(lsp_client: LanguageClient):
    await start(lsp_client, {"offersModelBuild": True})
    yield
    await lsp_client.shutdown_session()


async def test_a_missing_default_model_is_left_to_the_clients_offer(client: LanguageClient) -> None:
    for _ in range(100):
        if client.statuses and client.statuses[-1]["state"] == "error":
            break
        await asyncio.sleep(0.1)
    assert client.statuses[-1]["state"] == "error"
    assert "models build" in client.statuses[-1]["message"]
    await asyncio.sleep(0.3)
    errors = [m for m in client.messages if m.type == types.MessageType.Error]
    assert errors == []
