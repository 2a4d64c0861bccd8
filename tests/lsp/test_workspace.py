"""The repository as context, end to end through a real LSP client and the real model: the
workspace index (progress, .gitignore, definitions and snippets in the prompt, kept current),
exclusions of secrets, and alternatives when completion is asked for explicitly."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import command, config, inline, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

GEOMETRY = '''"""Shapes."""

import math


def circle_area(radius: float) -> float:
    """Area of a circle with this radius."""
    return math.pi * radius**2


class Rectangle:
    def __init__(self, width: float, height: float) -> None:
        self.width = width
        self.height = height
'''
MAIN = (
    "from geometry import circle_area\n\n\ndef report(r):\n    area = circle_area(r)\n    return "
)
SECRET_WORD = "zebra_secret_token_7f3a"


def _workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="fastcomplete-ws-"))
    (root / "geometry.py").write_text(GEOMETRY)
    (root / "main.py").write_text(MAIN)
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text(
        f"def circle_area_generated():\n    {SECRET_WORD}\n"
    )
    (root / ".env").write_text(f"API_KEY={SECRET_WORD}\n")
    (root / "private.py").write_text(f"def circle_area_private():\n    return '{SECRET_WORD}'\n")
    (root / ".fastcompleteignore").write_text("private.py\n")
    return root


ROOT = _workspace()


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, real_model: Path):
    registered: list[types.Registration] = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        registered.extend(params.registrations)

    lsp_client.registered = registered  # type: ignore[attr-defined]
    await start(lsp_client, model_options(real_model), root=ROOT)
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def _index_ready(client: LanguageClient) -> dict:
    for _ in range(200):
        stats = await command(client, "fastcomplete.stats")
        if stats["index"]["state"] == "ready":
            return stats
        await asyncio.sleep(0.05)
    raise TimeoutError(f"index not ready: {stats['index']}")


async def _prompt(client: LanguageClient, uri: str, line: int, character: int) -> str:
    found = await command(
        client,
        "fastcomplete.debugDocument",
        {"uri": uri, "position": {"line": line, "character": character}},
    )
    return found["prompt"]


def _end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2


@pytest.mark.asyncio
async def test_the_index_lends_definitions_and_keeps_out_ignored_and_secret_files(
    client: LanguageClient,
) -> None:
    stats = await _index_ready(client)
    assert stats["index"]["files"] == 2  # geometry.py, main.py: not build/, .env, private.py
    tokens = [t for t in client.progress_reports if "index" in str(t)]
    assert tokens, "indexing reports work-done progress"
    kinds = [type(p).__name__ for p in client.progress_reports[tokens[0]]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    methods = [r.method for r in client.registered]  # type: ignore[attr-defined]
    assert types.WORKSPACE_DID_CHANGE_WATCHED_FILES in methods
    uri = (ROOT / "main.py").as_uri()
    open_doc(client, uri, MAIN)
    prompt = await _prompt(client, uri, *_end(MAIN))
    assert "def circle_area(radius: float) -> float:" in prompt
    assert "Area of a circle with this radius." in prompt
    assert SECRET_WORD not in prompt


@pytest.mark.asyncio
async def test_excluded_files_get_no_completions_and_are_never_quoted(
    client: LanguageClient,
) -> None:
    await _index_ready(client)
    env_uri, private_uri = (ROOT / ".env").as_uri(), (ROOT / "private.py").as_uri()
    open_doc(client, env_uri, f"API_KEY={SECRET_WORD}\nOTHER=", "dotenv")
    private = (ROOT / "private.py").read_text() + "\ndef circle_"
    open_doc(client, private_uri, private)
    for uri, text in ((env_uri, f"API_KEY={SECRET_WORD}\nOTHER="), (private_uri, private)):
        got = await inline(client, uri, *_end(text))
        assert got is not None and list(got.items) == []
    stats = await command(client, "fastcomplete.stats")
    assert stats["emptyReasons"]["excluded"] == 2
    # Open, recently used, and still never lent to another file's prompt.
    uri = (ROOT / "main.py").as_uri()
    open_doc(client, uri, MAIN)
    assert SECRET_WORD not in await _prompt(client, uri, *_end(MAIN))


@pytest.mark.asyncio
async def test_a_saved_file_is_indexed_at_once(client: LanguageClient) -> None:
    await _index_ready(client)
    added = ROOT / "units.py"
    added.write_text(
        'def to_metres(feet: float) -> float:\n    """Feet to metres."""\n    return feet * 0.3048\n'
    )
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=added.as_uri(), type=types.FileChangeType.Created)]
        )
    )
    uri = (ROOT / "other.py").as_uri()
    text = "from units import to_metres\n\n\ndef height(h):\n    return to_metres(h"
    open_doc(client, uri, text)
    for _ in range(100):
        if "def to_metres(feet: float) -> float:" in await _prompt(client, uri, *_end(text)):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the new file's definition never reached the prompt")
    added.unlink()


@pytest.mark.asyncio
async def test_an_explicit_request_gets_distinct_alternatives(client: LanguageClient) -> None:
    uri = (ROOT / "shapes.py").as_uri()
    text = "def add(a, b):\n    return a"
    open_doc(client, uri, text)
    typed = await inline(client, uri, *_end(text))
    assert typed is not None and len(typed.items) == 1
    asked = await inline(client, uri, *_end(text), invoked=True)
    assert asked is not None
    texts = [item.insert_text for item in asked.items]
    assert 2 <= len(texts) <= 3 and len(set(texts)) == len(texts)
    assert all(isinstance(item.command, types.Command) for item in asked.items)
    stats = await command(client, "fastcomplete.stats")
    assert stats["server"]["invoked"] == 1
    assert stats["server"]["alternatives"] == len(texts) - 1


@pytest.mark.asyncio
async def test_partial_acceptance_is_counted_and_a_malformed_report_is_told(
    client: LanguageClient,
) -> None:
    uri = (ROOT / "main.py").as_uri()
    method = "fastcomplete/didPartiallyAccept"
    client.protocol.notify(
        method, {"textDocument": {"uri": uri}, "acceptedLength": 5, "kind": "word"}
    )
    client.protocol.notify(method, {"textDocument": {"uri": uri}, "kind": "line"})
    for _ in range(100):
        stats = await command(client, "fastcomplete.stats")
        if stats["server"].get("accepted_partial.word"):
            break
        await asyncio.sleep(0.05)
    assert stats["server"]["accepted_partial.word"] == 1
    assert stats["server"]["accepted_partial_chars"] == 5
    assert any(method in m.message for m in client.messages)
