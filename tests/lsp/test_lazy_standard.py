"""The standard model loads on first use (explain, fast mode off), not at start-up; the KV cache's
byte budget is a setting. End to end through a real LSP client, on the tiny model."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from tests.lsp.helpers import command, config, inline, model_options, open_doc, start

pytestmark = pytest.mark.asyncio

URI = "file:///work/lazy.py"
SOURCE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a"


async def _stats_when(client: LanguageClient, ready: Any, timeout: float = 60.0) -> dict:
    for _ in range(int(timeout * 10)):
        stats = await command(client, "fastcomplete.stats")
        if ready(stats):
            return stats
        await asyncio.sleep(0.1)
    raise AssertionError(f"not reached: {stats}")


def _loaded(stats: dict) -> set[str]:
    return set(stats.get("kv_cache_bytes", {}))


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, tiny_model: Path):
    await start(lsp_client, model_options(tiny_model, preloadStandard=False, kvCacheMB=96))
    yield
    await lsp_client.shutdown_session()


async def test_explain_loads_the_standard_model_on_first_use(client: LanguageClient) -> None:
    stats = await _stats_when(client, lambda s: s["modelsReady"])
    assert stats["kv_cache_budget_bytes"] == 96 << 20
    open_doc(client, URI, SOURCE)
    await inline(client, URI, 5, 12)  # completions are served meanwhile, by the fast model
    await asyncio.sleep(1.0)
    assert _loaded(await command(client, "fastcomplete.stats")) == {"fast"}
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 16}}
    result = await command(client, "fastcomplete.explain", {"uri": URI, "range": selection})
    assert result["model"].endswith("/standard")
    assert _loaded(await command(client, "fastcomplete.stats")) == {"fast", "standard"}


async def test_fast_mode_off_loads_the_standard_model(client: LanguageClient) -> None:
    await _stats_when(client, lambda s: s["modelsReady"])
    assert _loaded(await command(client, "fastcomplete.stats")) == {"fast"}
    assert await command(client, "fastcomplete.toggleFastMode") == {"fastMode": False}
    await _stats_when(client, lambda s: _loaded(s) == {"fast", "standard"})
    open_doc(client, URI, SOURCE)
    await inline(client, URI, 5, 12)
    stats = await command(client, "fastcomplete.stats")
    assert stats["models"][next(m for m in stats["models"] if m.endswith("/standard"))]["requests"]


@pytest_lsp.fixture(config=config())
async def preloaded(lsp_client: LanguageClient, tiny_model: Path):
    await start(lsp_client, model_options(tiny_model, preloadStandard=True))
    yield
    await lsp_client.shutdown_session()


async def test_preload_loads_both_at_start_up(preloaded: LanguageClient) -> None:
    stats = await _stats_when(preloaded, lambda s: _loaded(s) == {"fast", "standard"})
    assert stats["kv_cache_budget_bytes"] == 768 << 20  # the default


@pytest_lsp.fixture(config=config())
async def remote_down(lsp_client: LanguageClient, tiny_model: Path):
    with socket.socket() as s:  # a port nobody listens on: the team's server is down
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    remote = {"url": url, "model": "m", "completions": True, "retries": 0}
    await start(
        lsp_client, model_options(tiny_model, fastMode=False, preloadStandard=False, remote=remote)
    )
    yield
    await lsp_client.shutdown_session()


async def test_a_remote_that_is_down_leaves_completions_to_the_fast_model(
    remote_down: LanguageClient,
) -> None:
    await _stats_when(remote_down, lambda s: s["modelsReady"])
    open_doc(remote_down, URI, SOURCE)
    got = await inline(remote_down, URI, 5, 12, invoked=True)
    stats = await command(remote_down, "fastcomplete.stats")
    assert stats["events"]["fallback.remote_to_fast"] >= 1, stats["events"]
    # The fast model ran the request (the tiny model's answer itself may be filtered away).
    fast = next(m for m in stats["models"] if m.endswith("/fast"))
    assert stats["models"][fast]["requests"] >= 1, stats["models"]
    if got.items:
        assert got.items[0].command.arguments[0]["model"].endswith("/fast")
    # With a remote answering completions, fast mode off does not load the standard model.
    assert _loaded(stats) == {"fast"}
