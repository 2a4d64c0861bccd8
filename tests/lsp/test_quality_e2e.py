"""Issue 26 end to end, through a real LSP client and the real model: an edit in one file
reaching the prompt in another (with the name it brought in), and the show gate holding back,
answering when asked, learning from an accept and counting all of it in the stats."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import (
    command,
    config,
    inline,
    insert,
    model_options,
    open_doc,
    start,
    wait_ready,
)

pytestmark = pytest.mark.real_model

MODELS = "file:///work/pkg/réglages.py"  # non-ASCII path and text: UTF-16 positions
MODELS_TEXT = (
    "import dataclasses\n\n\n@dataclasses.dataclass\nclass Réglages:\n"
    "    name: str\n    retries: int = 3\n"
)
USE = "file:///work/pkg/run.py"
USE_TEXT = (
    "from pkg.réglages import Réglages\n\n\ndef run(conf: Réglages) -> float:\n    return conf."
)


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    await start(lsp_client, model_options(real_model, showGate=True, prefetch=False))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


def _settings(client: LanguageClient, **values: object) -> None:
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fastcomplete": values})
    )


async def test_an_edit_in_one_file_is_in_the_prompt_of_another(client: LanguageClient) -> None:
    open_doc(client, MODELS, MODELS_TEXT)
    insert(client, MODELS, 2, 6, len("    retries: int = 3"), "\n    délai_s: float = 1.5")
    client.text_document_did_close(  # closed: no open-document snippet, only the recent edit
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=MODELS))
    )
    open_doc(client, USE, USE_TEXT)
    at = {"line": 4, "character": len("    return conf.")}
    seen = await command(client, "fastcomplete.debugDocument", {"uri": USE, "position": at})
    assert "#     délai_s: float = 1.5\n" in seen["prompt"]
    assert "class Réglages:" in seen["prompt"]  # the class the field belongs to
    answer = await inline(client, USE, 4, at["character"])
    assert answer.items, "the model produced nothing"
    _settings(client, recentEdits=False)
    seen = await command(client, "fastcomplete.debugDocument", {"uri": USE, "position": at})
    assert "délai_s" not in seen["prompt"]


async def test_the_gate_holds_back_answers_when_asked_and_learns(client: LanguageClient) -> None:
    source = "def mean(values: list[float]) -> float:\n    return sum(values) / "
    uri = "file:///work/stats.py"
    open_doc(client, uri, source)
    end = (1, len("    return sum(values) / "))
    _settings(client, showGateThreshold=1.0)  # nothing is likely enough
    held = await inline(client, uri, *end)
    assert held is None or not held.items
    stats = await command(client, "fastcomplete.stats")
    assert stats["server"]["held_back"] == 1 and stats["emptyReasons"]["held_back"] == 1
    assert stats["gate"]["heldBack"] == 1 and stats["gate"]["enabled"] is True
    asked = await inline(client, uri, *end, invoked=True)
    assert asked.items, "an explicit request is answered whatever the gate says"
    _settings(client, showGateThreshold=0.0)
    shown = await inline(client, uri, *end)
    assert shown.items
    item = shown.items[0]
    await command(client, item.command.command, *item.command.arguments)  # accepted
    stats = await command(client, "fastcomplete.stats")
    assert stats["gate"]["shownTaken"] == 1 and stats["gate"]["labels"] >= 1
