"""A compressed full day of typing against one server: memory, threads and KV cache stay bounded."""

from __future__ import annotations

import os
import sysconfig
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.helpers import command, config, model_options, start, wait_ready

REQUESTS = int(os.environ.get("FASTCOMPLETE_SOAK_REQUESTS", "20000"))
WARM_UP = REQUESTS // 6
SAMPLE_EVERY = 250
FILES = ("textwrap.py", "shlex.py", "fnmatch.py")


def _proc_status(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            fields[key] = int(value.split()[0])
    return fields


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, tiny_model: Path):
    await start(lsp_client, model_options(tiny_model, maxTokens=8))
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
async def test_a_day_of_typing_stays_bounded(client: LanguageClient) -> None:
    pid = client._server.pid  # the `fastcomplete serve` process
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [(stdlib / name).read_text() for name in FILES]
    samples: list[tuple[int, int, int]] = []  # (requests, rss KiB, threads)
    started = time.monotonic()
    answered = errors = 0
    sent = 0
    round_ = 0
    while sent < REQUESTS:
        # Each round types a stretch of a real file into a fresh document, key by key.
        text = sources[round_ % len(sources)]
        uri = f"file:///soak/doc{round_ % 5}.py"
        start_at = (round_ * 997) % max(1, len(text) - 2000)
        typed = text[start_at : start_at + 600]
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=""
                )
            )
        )
        line = char = 0
        for i, ch in enumerate(typed):
            if sent >= REQUESTS:
                break
            pos = types.Position(line, char)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=ch)
                    ],
                )
            )
            line, char = (line + 1, 0) if ch == "\n" else (line, char + 1)
            try:
                result = await client.text_document_inline_completion_async(
                    types.InlineCompletionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        position=types.Position(line, char),
                        context=types.InlineCompletionContext(
                            trigger_kind=types.InlineCompletionTriggerKind.Automatic
                        ),
                    )
                )
                answered += bool(result and result.items)
            except Exception:
                errors += 1
            sent += 1
            if sent % SAMPLE_EVERY == 0:
                status = _proc_status(pid)
                samples.append((sent, status["VmRSS"], status["Threads"]))
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        round_ += 1
    elapsed = time.monotonic() - started
    stats = await command(client, "fastcomplete.stats")
    print("\nsamples:", [(s[0], s[1] // 1024) for s in samples[::8]])
    after = [s for s in samples if s[0] >= WARM_UP]
    base_rss = after[0][1]
    growth = (max(s[1] for s in after) - base_rss) / base_rss
    threads = {s[2] for s in after}
    print(
        f"\nsoak: {sent} requests in {elapsed:.0f} s ({answered} answered, {errors} errors); "
        f"RSS after warm-up {base_rss / 1024:.0f} MB -> max {max(s[1] for s in after) / 1024:.0f} MB "
        f"({100 * growth:+.1f}%), threads {sorted(threads)}, "
        f"KV cache {stats['kv_cache_bytes']} bytes"
    )
    assert errors == 0
    assert growth < 0.10
    assert max(threads) - min(threads) <= 2
    assert all(b <= 768 << 20 for b in stats["kv_cache_bytes"].values())
    assert (await command(client, "fastcomplete.stats"))["modelsReady"]  # still serving
