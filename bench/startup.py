"""Start-up and memory: from `fastcomplete serve` to the first completion, and the server's RSS.

    python -m bench.startup [--json bench/results/startup.json]

For the default (the standard model loads on first use) and `preloadStandard: true`: a fresh
`fastcomplete serve` (empty completion cache), initialize, didOpen, then an inline completion
asked every 50 ms until one comes back with text: that is the time to the first completion. Then
the server's RSS (VmRSS) with what it loaded, an explain (which loads the standard model on first
use) and its time, and the peak RSS (VmHWM) at the end: both models loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_replay import rss_mb, server_process
from inference.paths import model_dir
from lsp_server.cli.demo import DemoClient, client_capabilities
from models.choice import selected_model

SOURCE = (
    "import json\n\n\ndef load_orders(path):\n    with open(path) as f:\n"
    "        return json.load(f)\n\n\ndef total(orders):\n    return sum(order['price'] for order"
)
URI = "file:///bench/startup.py"
ASK_EVERY_S = 0.05
TIMEOUT_S = 180.0


async def one_start(preload: bool) -> dict[str, Any]:
    root = model_dir(selected_model())
    home = tempfile.mkdtemp(prefix="fastcomplete-startup-")
    client = DemoClient()
    started = time.perf_counter()
    env = {**os.environ, "FASTCOMPLETE_HOME": home}
    await client.start_io(sys.executable, "-m", "lsp_server.cli", "serve", env=env)
    pid = server_process(client).pid
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client_capabilities(),
            initialization_options={
                "fastModelPath": str(root / "fast"),
                "standardModelPath": str(root / "standard"),
                "preloadStandard": preload,
                "workspaceIndex": False,
            },
        )
    )
    client.initialized(types.InitializedParams())
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=SOURCE
            )
        )
    )
    lines = SOURCE.split("\n")
    line, character = len(lines) - 1, len(lines[-1])
    text = ""
    while not text:
        if time.perf_counter() - started > TIMEOUT_S:
            raise RuntimeError("no completion in time")
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=URI),
                position=types.Position(line=line, character=character),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic
                ),
            )
        )
        text = result.items[0].insert_text if result and result.items else ""
        if not text:
            await asyncio.sleep(ASK_EVERY_S)
    first_s = time.perf_counter() - started
    want = 2 if preload else 1
    while len((await client.command("fastcomplete.stats")).get("kv_cache_bytes", {})) < want:
        await asyncio.sleep(0.1)
    rss_loaded = rss_mb(pid, "VmRSS")
    selection = {"start": {"line": 3, "character": 0}, "end": {"line": 5, "character": 28}}
    asked = time.perf_counter()
    await client.command("fastcomplete.explain", {"uri": URI, "range": selection})
    explain_s = time.perf_counter() - asked
    row = {
        "first_completion_s": round(first_s, 2),
        "rss_after_start_mb": rss_loaded,
        "first_explain_s": round(explain_s, 2),
        "peak_rss_both_models_mb": rss_mb(pid, "VmHWM"),
    }
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/startup.json"))
    args = parser.parse_args()
    if not (model_dir(selected_model()) / "fast").is_dir():
        print("no model: run `fastcomplete models build`", file=sys.stderr)
        return 1
    rows = {
        "default (standard on first use)": asyncio.run(one_start(False)),
        "preloadStandard": asyncio.run(one_start(True)),
    }
    keys = list(next(iter(rows.values())))
    print("\n")  # after the explanations the client echoes while they stream
    print(f"{'':<34}" + "".join(f"{k:>26}" for k in keys))
    for name, row in rows.items():
        print(f"{name:<34}" + "".join(f"{row[k]!s:>26}" for k in keys))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
