"""Suggestions beside the editor's suggest widget, and acceptance as people do it (whole, word,
line) with retention, end to end through a real LSP client and the real model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import command, config, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

URI = "file:///work/café.py"  # non-ASCII in the path and the text: UTF-16 positions
TEXT = (
    "# Compteur — à remettre à zéro.\n"
    "class Counter:\n"
    "    def __init__(self):\n"
    "        self.count = 0\n"
    "        self.total = 0\n"
    "\n"
    "    def reset(self):\n"
    "        self.count = 0\n"
    "        self.t"
)
CHECKS_S = [1, 2]


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    await start(lsp_client, model_options(real_model, retentionChecksS=CHECKS_S))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


def _edit(client: LanguageClient, version: int, line: int, char: int, end: int, text: str) -> None:
    rng = types.Range(types.Position(line, char), types.Position(line, end))
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)],
        )
    )


async def _after_item(client: LanguageClient, item: str) -> types.InlineCompletionList:
    """The request VS Code sends while its suggest widget has `item` selected for `self.t`."""
    line = TEXT.count("\n")
    typed = len("        self.")
    rng = types.Range(types.Position(line, typed), types.Position(line, typed + 1))
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line, typed + 1),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic,
                selected_completion_info=types.SelectedCompletionInfo(range=rng, text=item),
            ),
        )
    )


async def _stats_when(client: LanguageClient, ready: Any) -> dict[str, Any]:
    for _ in range(100):
        stats = await command(client, "fastcomplete.stats")
        if ready(stats):
            return stats
        await asyncio.sleep(0.1)
    raise AssertionError(stats)


@pytest.mark.asyncio
async def test_a_suggestion_extends_the_suggest_widgets_item_and_retention_is_counted(
    client: LanguageClient,
) -> None:
    open_doc(client, URI, TEXT)
    got = await _after_item(client, "total")
    assert got.items, "a suggestion after the selected item"
    item = got.items[0]
    line = TEXT.count("\n")
    # It replaces the item's range and starts with its text, or VS Code would not show it.
    assert item.insert_text.startswith("total") and len(item.insert_text) > len("total")
    assert item.range == types.Range(
        types.Position(line, len("        self.")), types.Position(line, len("        self.t"))
    )
    # A different item gets a suggestion after that one, not the same text.
    other = await _after_item(client, "count")
    assert other.items and other.items[0].insert_text.startswith("count")

    # Tab takes the widget's item: the suggestion after it is at hand (no model run).
    _edit(client, 2, line, len("        self."), len("        self.t"), "total")
    args = item.command.arguments[0]
    assert (args["line"], args["character"], args["text"]) == (line, 13, item.insert_text)
    rest = item.insert_text[len("total") :]
    _edit(client, 3, line, len("        self.total"), len("        self.total"), rest)
    await command(client, "fastcomplete.accepted", {**args, "text": item.insert_text})
    # Then a word of another suggestion is accepted, and rewritten at once: half kept.
    end = len("        self." + item.insert_text.split("\n")[-1])
    client.protocol.notify(
        "fastcomplete/didPartiallyAccept",
        {
            "textDocument": {"uri": URI},
            "position": {"line": line, "character": end},
            "acceptedLength": 4,
            "kind": "word",
            "text": " # é",
        },
    )
    _edit(client, 4, line, end, end, " # é")
    _edit(client, 5, line, end + 3, end + 4, "e")

    both = len(item.insert_text) + 4
    stats = await _stats_when(
        client, lambda s: s["acceptance"]["retention"]["2s"]["acceptedChars"] == both
    )
    acceptance = stats["acceptance"]
    assert acceptance["full"] == 1 and acceptance["partialWord"] == 1
    assert acceptance["fullChars"] == len(item.insert_text) and acceptance["partialChars"] == 4
    for check in ("1s", "2s"):
        kept = acceptance["retention"][check]
        assert kept["acceptedChars"] == both
        assert kept["retainedChars"] == both - 1  # the é became an e
    assert stats["server"]["after_selected_item"] == 2
