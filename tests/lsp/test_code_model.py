"""The code model (Qwen2.5-Coder-0.5B from the catalogue) end to end: a real LSP client against
`fastcomplete serve`, a FIM prompt healed mid-word, and no special token in any answer (the
suite's conftest scans every answer)."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from inference.manifest import read_manifest
from tests.lsp.helpers import command, config, inline, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

URI = "file:///work/sandbox/agents.py"
SOURCE = (
    "import os\n\n\n"
    "class SandboxAgent:\n"
    "    def __init__(self, name: str) -> None:\n"
    "        self.name = name\n\n\n"
    "def make_agent(name: str) -> SandboxAgent:\n"
    "    agent = San\n"
    "    return agent\n"
)
CURSOR = (9, len("    agent = San"))


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, code_model: Path):
    await start(lsp_client, model_options(code_model))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


def test_the_code_model_keeps_its_fim_tokens(code_model: Path) -> None:
    manifest = read_manifest(code_model / "fast")
    assert manifest.fim is not None and manifest.fim.file_sep == "<|file_sep|>"
    assert manifest.precision == "int8-weight-only"


async def test_mid_word_completion_is_healed(client: LanguageClient) -> None:
    """`agent = San|`: the prompt ends inside `SandboxAgent`; healed, the model re-spells it."""
    open_doc(client, URI, SOURCE)
    answer = await inline(client, URI, *CURSOR, invoked=True)
    assert answer is not None and answer.items
    first = answer.items[0].insert_text
    text = first if isinstance(first, str) else first.value
    assert text.startswith("dboxAgent("), text  # not " Agent(" or "Sandbox..." again
    stats = await command(client, "fastcomplete.stats")
    assert stats["server"]["answered"] >= 1
