"""The KV store through a real server: what one server prefilled, the next one (a restarted
editor, the same home) finds on disk, and the file it reopens is warm without computing it."""

from __future__ import annotations

import asyncio
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.helpers import command, config, inline, model_options, open_doc, start, wait_ready

pytestmark = pytest.mark.real_model

URI = "file:///work/wrap.py"


def _document() -> tuple[str, int, int]:
    """textwrap.py's first 150 lines and half of the next: several hundred tokens of prompt."""
    lines = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text().split("\n")
    cut = lines[150][: len(lines[150]) // 2]
    return "\n".join([*lines[:150], cut]), 150, len(cut)


async def _until(client: LanguageClient, done: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        stats = await command(client, "fastcomplete.stats")
        if done(stats) or loop.time() > deadline:
            return stats
        await asyncio.sleep(0.2)


async def _session(real_model: Path, home: Path, stores: bool) -> dict[str, Any]:
    """One editor session: open the file, rest the cursor until the prompt is prefilled (and,
    when this session `stores` it, written to the KV store), ask."""
    client = await config(FASTCOMPLETE_HOME=str(home), FASTCOMPLETE_KV_STORE_MB="64").start()
    try:
        await start(client, model_options(real_model))
        await wait_ready(client)
        text, line, character = _document()
        open_doc(client, URI, text)
        focus = {"textDocument": {"uri": URI}, "position": {"line": line, "character": character}}
        client.protocol.notify("fastcomplete/didFocus", focus)
        stats = await _until(
            client, lambda s: any(r["line"] == line for r in s["prefill"]["ready"])
        )
        if stores:
            stats = await _until(client, lambda s: s["kv_store"]["fast"]["saved"] >= 1)
        answer = await inline(client, URI, line, character)
        return {"stats": stats, "items": answer.items if answer else []}
    finally:
        await client.shutdown_session()


async def test_the_next_server_finds_the_prompt_on_disk(real_model: Path, tmp_path: Path) -> None:
    first = await _session(real_model, tmp_path / "home", stores=True)
    store = first["stats"]["kv_store"]["fast"]
    assert store["saved"] == 1 and store["hits"] == 0 and store["bytes"] > 0
    computed_first = first["stats"]["events"]["warmup_tokens"]
    assert computed_first >= 256  # the whole prompt, from nothing

    again = await _session(real_model, tmp_path / "home", stores=False)  # a restarted editor
    store = again["stats"]["kv_store"]["fast"]
    assert store["hits"] == 1 and store["corrupt"] == 0
    assert store["saved"] == 0  # held already: not written again
    # The second server computed only what the stored head lacked (the last, partial block).
    assert again["stats"]["events"]["warmup_tokens"] < 64
    assert again["items"], "the warm prompt answers"
