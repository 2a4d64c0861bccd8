"""A client without LSP 3.18 inline completion gets the completion as one textDocument/completion
item (with or without a completion context)."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import capabilities, config, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

URI = "file:///work/plain.py"
TEXT = "def add(a, b):\n    return a"


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    caps = capabilities()
    caps.text_document.inline_completion = None
    await start(lsp_client, model_options(real_model), caps)
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
@pytest.mark.parametrize("with_context", [False, True])
async def test_completion_items_for_clients_without_inline_completion(
    client: LanguageClient, with_context: bool
) -> None:
    open_doc(client, URI, TEXT)
    context = (
        types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked)
        if with_context
        else None
    )
    got = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(1, len("    return a")),
            context=context,
        )
    )
    assert isinstance(got, types.CompletionList)
    assert len(got.items) == 1 and got.items[0].text_edit is not None
