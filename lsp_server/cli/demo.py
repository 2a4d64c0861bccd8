"""`fastcomplete demo`: a real LSP client session against `fastcomplete serve` on a sample file.

Prints the inline completion from the fast and the standard model with the latency the editor
sees, then streams an explanation from the standard model as the server reports it. The server
gets a throwaway home (completion cache, logs), so every run shows the models' own latency; the
second request at the same place is answered from what the server showed (no model run). The
models are the user's, named in the initialization options.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from inference.paths import variant_dir
from lsp_server.protocol.transport import STATUS_NOTIFICATION
from models.choice import selected_model

SAMPLE_URI = "file:///demo/orders.py"
SAMPLE = """import json
from dataclasses import dataclass


@dataclass
class Order:
    order_id: str
    quantity: int
    unit_price: float

    def total(self) -> float:
        return self.quantity * self.unit_price


def load_orders(path: str) -> list[Order]:
    with open(path) as fh:
        rows = json.load(fh)
    return [Order(**row) for row in rows]


def revenue(orders: list[Order]) -> float:
    return sum(order."""


def client_capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            synchronization=types.TextDocumentSyncClientCapabilities(),
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
    )


class DemoClient(LanguageClient):
    def __init__(self) -> None:
        super().__init__("fastcomplete-demo", "0.1.0")
        self.streamed = ""

        @self.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(params: types.WorkDoneProgressCreateParams) -> None:
            return None

        @self.feature(types.PROGRESS)
        def progress(params: types.ProgressParams) -> None:
            value = params.value if isinstance(params.value, dict) else {}
            text = value.get("message") if value.get("kind") == "report" else None
            if "explain" in str(params.token) and text and text.startswith(self.streamed):
                sys.stdout.write(text[len(self.streamed) :])
                sys.stdout.flush()
                self.streamed = text

        @self.feature(types.WINDOW_SHOW_MESSAGE)
        def show(params: types.ShowMessageParams) -> None:
            print(f"[server] {params.message}")

        @self.feature(STATUS_NOTIFICATION)
        def status(params: Any) -> None:
            return None  # the status bar's feed: a terminal has none (pygls would log each one)

    async def command(self, name: str, *args: Any) -> Any:
        return await self.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(args))
        )

    async def complete(self, line: int, character: int) -> tuple[str, float]:
        started = time.perf_counter()
        result = await self.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=SAMPLE_URI),
                position=types.Position(line, character),
                # As an editor asks while typing (an Invoked request would get alternatives,
                # freshly computed, instead of the suggestion the server remembers).
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic
                ),
            )
        )
        elapsed = (time.perf_counter() - started) * 1000
        items = result.items if result else []
        return (items[0].insert_text if items else ""), elapsed


async def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="fastcomplete-demo-") as home:
        return await demo_session(home)


async def demo_session(home: str) -> int:
    client = DemoClient()
    env = {**os.environ, "FASTCOMPLETE_HOME": home}
    await client.start_io(sys.executable, "-m", "lsp_server.cli", "serve", env=env)
    models = {
        "fastModelPath": str(variant_dir(selected_model(), "fast")),
        "standardModelPath": str(variant_dir(selected_model(), "standard")),
        "preloadStandard": True,  # the demo asks both models
    }
    await client.initialize_async(
        types.InitializeParams(capabilities=client_capabilities(), initialization_options=models)
    )
    client.initialized(types.InitializedParams())
    for _ in range(600):
        stats = await client.command("fastcomplete.stats")
        if stats["modelsReady"] and len(stats.get("kv_cache_bytes", {})) == 2:
            break
        await asyncio.sleep(0.2)
    else:
        print("models did not load: run `fastcomplete models build`", file=sys.stderr)
        return 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=SAMPLE_URI, language_id="python", version=1, text=SAMPLE
            )
        )
    )
    lines = SAMPLE.split("\n")
    cursor = (len(lines) - 1, len(lines[-1]))
    print("sample file (cursor at the end):\n" + "\n".join("    " + r for r in lines[-3:]))
    for label in ("fast (INT8)", "standard (FP32)"):
        text, ms = await client.complete(*cursor)
        print(f"\n{label:<16} {ms:7.0f} ms  -> {text!r}")
        text, ms = await client.complete(*cursor)
        print(f"{'  asked again':<16} {ms:7.0f} ms  -> {text!r}  (remembered by the server)")
        await client.command("fastcomplete.toggleFastMode")
    print("\nexplain `load_orders` (standard model, streamed):\n")
    selection = {"start": {"line": 14, "character": 0}, "end": {"line": 17, "character": 40}}
    started = time.perf_counter()
    result = await client.command("fastcomplete.explain", {"uri": SAMPLE_URI, "range": selection})
    print(f"\n\n({result['model']}, {time.perf_counter() - started:.1f} s)")
    stats = await client.command("fastcomplete.stats")
    for model, m in stats["models"].items():
        print(
            f"{model}: {m['requests']} requests, {m['cache_hits']} cache hits, "
            f"TTFT p50 {m['ttft_ms']['p50'] and round(m['ttft_ms']['p50'])} ms, "
            f"TPOT p50 {m['tpot_ms']['p50'] and round(m['tpot_ms']['p50'], 1)} ms"
        )
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return 0


def main() -> int:
    return asyncio.run(run_demo())
