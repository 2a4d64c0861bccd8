"""Typing replay: real files typed character by character through a real LSP client.

    python bench/typing.py [--chars 240] [--json bench/results/typing.json]

For each file size (a 50-line and a 2,000-line Python standard-library file) and fast mode on and
off: a fresh `fastcomplete serve`, the file opened without one region, and that region typed back
with human-like gaps between keys (log-normal around 140 ms, longer pauses after newlines). After
every key the client sends didChange and an inline-completion request, cancelling the previous
request as VS Code does, and `fastcomplete/didFocus` when the cursor rests 150 ms. Latency is
measured at the client, from request to answer.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this folder would shadow the standard library's `typing` with typing.py.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))  # the repository root, for `bench.lsp_replay`

import argparse
import asyncio
import json
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from bench.lsp_replay import human_gaps
from inference.paths import model_dir, selected_model
from lsp_server.demo import DemoClient, client_capabilities

FOCUS_AFTER_S = 0.15  # the clients send fastcomplete/didFocus when the cursor rests this long
FILES = {"50 lines": ("textwrap.py", 50), "2000 lines": ("argparse.py", 2000)}


def _doc(name: str, lines: int) -> str:
    text = (Path(sysconfig.get_paths()["stdlib"]) / name).read_text()
    return "\n".join(text.split("\n")[:lines])


def _region(text: str, chars: int) -> tuple[str, str, str]:
    """(before, typed, after): the typed region is the last `chars` characters of code lines
    ending near the end of the file, so the prompt is long on the long file."""
    lines = text.split("\n")
    end = len(lines) - 3
    start = end
    while start > 0 and sum(len(r) + 1 for r in lines[start:end]) < chars:
        start -= 1
    before = "\n".join(lines[:start]) + "\n"
    typed = "\n".join(lines[start:end])[:chars]
    after = text[len(before) + len(typed) :]
    return before, typed, after


def _position(text: str) -> types.Position:
    lines = text.split("\n")
    return types.Position(len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2)


async def replay(
    label: str,
    text: str,
    fast_mode: bool,
    chars: int,
    seed: int,
    workspace: Path | None = None,
    index_on: bool = True,
) -> dict[str, Any]:
    """One typing run; `workspace`: the folder the editor has open (indexed before typing
    starts when `index_on`), the typed file among its files."""
    root = model_dir(selected_model())
    client = DemoClient()
    home = tempfile.mkdtemp(prefix="fastcomplete-typing-")
    await client.start_io(
        sys.executable, "-m", "lsp_server.cli", "serve", env={"FASTCOMPLETE_HOME": home}
    )
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client_capabilities(),
            root_uri=workspace.as_uri() if workspace else None,
            initialization_options={
                "fastMode": fast_mode,
                "fastModelPath": str(root / "fast"),
                "standardModelPath": str(root / "standard"),
                "preloadStandard": True,
                "workspaceIndex": index_on,
            },
        )
    )
    client.initialized(types.InitializedParams())
    while True:
        stats = await client.command("fastcomplete.stats")
        if len(stats.get("kv_cache_bytes", {})) == 2 and stats["index"]["state"] != "building":
            break  # both models loaded, the workspace indexed
        await asyncio.sleep(0.2)
    uri = (workspace / "typed.py").as_uri() if workspace else "file:///bench/typed.py"
    before, typed, after = _region(text, chars)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=before + after
            )
        )
    )
    await asyncio.sleep(2.0)  # an editor is open a moment before the first key
    current = before
    sent: dict[str, float] = {}
    latencies: list[float] = []
    outcomes = {"requests": 0, "answered": 0, "empty": 0, "cancelled": 0}
    pending: list[asyncio.Future] = []
    last_id: str | None = None

    def done(msg_id: str, fut: Any) -> None:
        try:
            result = fut.result()
        except Exception:
            outcomes["cancelled"] += 1
            return
        if result is not None and result.items:
            outcomes["answered"] += 1
            latencies.append((time.perf_counter() - sent[msg_id]) * 1000)
        else:
            outcomes["empty"] += 1

    for i, (ch, gap) in enumerate(zip(typed, human_gaps(typed, seed), strict=True)):
        pos = _position(current)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=ch)
                ],
            )
        )
        current += ch
        if last_id is not None:
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=last_id))
        msg_id = f"req-{i}"
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=_position(current),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        sent[msg_id] = time.perf_counter()
        fut = client.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
        )
        fut.add_done_callback(lambda f, m=msg_id: done(m, f))
        pending.append(asyncio.wrap_future(fut))
        outcomes["requests"] += 1
        last_id = msg_id
        if gap > FOCUS_AFTER_S:  # the cursor rested: VS Code's client tells the server where
            await asyncio.sleep(FOCUS_AFTER_S)
            focus = {"textDocument": {"uri": uri}, "position": _position(current)}
            client.protocol.notify("fastcomplete/didFocus", focus)
            gap -= FOCUS_AFTER_S
        await asyncio.sleep(gap)
    await asyncio.gather(*pending, return_exceptions=True)
    stats = await client.command("fastcomplete.stats")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    model = "smollm2-135m/fast" if fast_mode else "smollm2-135m/standard"
    m = stats["models"].get(model, {})
    lat = sorted(latencies)
    return {
        "file": label,
        "fast_mode": fast_mode,
        "index": stats["index"].get("files", 0) if index_on and workspace else "off",
        **outcomes,
        "server_stale_dropped": stats["server"].get("stale_dropped", 0),
        "latency_p50_ms": round(statistics.median(lat), 1) if lat else None,
        "latency_p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 1) if lat else None,
        "ttft_p50_ms": m.get("ttft_ms", {}).get("p50") and round(m["ttft_ms"]["p50"], 1),
        "kv_reuse_share": m.get("kv_reuse_share") and round(m["kv_reuse_share"], 3),
        "prompt_tokens": m.get("prompt_tokens"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chars", type=int, default=240, help="characters typed per run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=Path("bench/results/typing.json"))
    parser.add_argument(
        "--workspace",
        type=Path,
        help="type into a file of this folder, with the workspace index on and off (fast mode)",
    )
    args = parser.parse_args()
    rows = []
    runs = [(fast, label, True) for fast in (True, False) for label in FILES]
    if args.workspace:
        runs = [(True, label, index_on) for index_on in (False, True) for label in FILES]
    for fast_mode, label, index_on in runs:
        name, lines = FILES[label]
        row = asyncio.run(
            replay(
                label,
                _doc(name, lines),
                fast_mode,
                args.chars,
                args.seed,
                args.workspace.resolve() if args.workspace else None,
                index_on,
            )
        )
        rows.append(row)
        print(f"done: {label}, fast mode {'on' if fast_mode else 'off'}", file=sys.stderr)
    cols = [
        "file",
        "fast_mode",
        "index",
        "requests",
        "answered",
        "empty",
        "cancelled",
        "server_stale_dropped",
        "latency_p50_ms",
        "latency_p95_ms",
        "ttft_p50_ms",
        "kv_reuse_share",
    ]
    print("\ntyping replay (each key: didChange + inlineCompletion, previous request cancelled)\n")
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    indexed = [r for r in rows if r["fast_mode"] and (not args.workspace or r["index"] != "off")]
    fast = {r["file"]: r for r in indexed}
    if fast["50 lines"]["latency_p50_ms"] and fast["2000 lines"]["latency_p50_ms"]:
        ratio = fast["2000 lines"]["latency_p50_ms"] / fast["50 lines"]["latency_p50_ms"]
        print(f"\nfast mode p50, 2000-line / 50-line file: {ratio:.2f} (target <= 1.5)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"chars": args.chars, "rows": rows}, indent=2))
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
