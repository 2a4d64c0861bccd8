"""What bench/first_ask.py and bench/assist.py share: a real `fastcomplete serve` behind pygls's
client (lsp_server.cli.demo.DemoClient), started as bench/typing_replay.py starts it, and the messages
VS Code sends while a person edits (didOpen/didChange/didClose, fastcomplete/didFocus,
inline-completion requests and their cancellation).
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from inference import metrics
from inference.paths import model_dir
from lsp_server.cli.demo import DemoClient, client_capabilities
from models.choice import selected_model

DID_FOCUS = "fastcomplete/didFocus"
LOAD_TIMEOUT_S = 180.0


@dataclass
class Served:
    """A started server: the client talking to it, its throwaway home (logs), its stderr tail."""

    client: DemoClient
    home: str
    stderr: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=200))
    drain: asyncio.Task | None = None


def server_process(client: DemoClient) -> Any:
    """The `fastcomplete serve` subprocess behind a pygls client (pygls keeps it private), or
    None: the one place the benchmarks reach for it."""
    return getattr(client, "_server", None)


def rss_mb(pid: int, field: str = "VmHWM") -> float | None:
    """A process's memory from /proc, in MB: VmHWM (peak RSS) or VmRSS (now)."""
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith(field + ":"):
                return round(int(row.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def start_server(
    settings: dict[str, Any], prefix: str, workspace: Path | None = None, wait: bool = True
) -> Served:
    """A fresh `fastcomplete serve` with a throwaway FASTCOMPLETE_HOME (an empty completion
    cache), the user's models named in the initialization options, both models loaded.
    `workspace`: the folder the editor has open (the server indexes it). `wait`: False returns
    right after `initialized`, as an editor goes on while the server loads (nothing preloaded
    beyond the user's defaults)."""
    # Read from this process's FASTCOMPLETE_HOME; FASTCOMPLETE_MODEL picks another built model.
    root = model_dir(selected_model())
    home = tempfile.mkdtemp(prefix=f"fastcomplete-{prefix}-")
    client = DemoClient()  # it ignores the status bar's feed
    env = {**os.environ, "FASTCOMPLETE_HOME": home}
    await client.start_io(sys.executable, "-m", "lsp_server.cli", "serve", env=env)
    served = Served(client, home)
    # The server logs to a stderr pipe nobody else reads: a full pipe would stall it mid-run.
    process = server_process(client)
    if process is not None and process.stderr is not None:
        served.drain = asyncio.create_task(_drain(process.stderr, served.stderr))
    folders = [types.WorkspaceFolder(workspace.as_uri(), workspace.name)] if workspace else None
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client_capabilities(),
            root_uri=workspace.as_uri() if workspace else None,
            workspace_folders=folders,
            initialization_options={
                "fastModelPath": str(root / "fast"),
                "standardModelPath": str(root / "standard"),
                "preloadStandard": wait,  # the replays compare both models
                **settings,
            },
        )
    )
    client.initialized(types.InitializedParams())
    if not wait:
        return served
    deadline = time.perf_counter() + LOAD_TIMEOUT_S
    while True:
        stats = await client.command("fastcomplete.stats")
        if stats["modelsReady"] and len(stats.get("kv_cache_bytes", {})) == 2:
            break
        if time.perf_counter() > deadline:
            tail = "".join(served.stderr)[-2000:]
            raise RuntimeError(f"models did not load in {LOAD_TIMEOUT_S:.0f} s:\n{tail}")
        await asyncio.sleep(0.2)
    return served


async def _drain(stream: asyncio.StreamReader, into: collections.deque[str]) -> None:
    while line := await stream.readline():
        into.append(line.decode("utf-8", "replace"))


async def stop_server(served: Served) -> dict[str, Any]:
    """The server's stats, then shutdown/exit."""
    client = served.client
    stats = await client.command("fastcomplete.stats")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    if served.drain is not None:
        served.drain.cancel()
    return stats


def code_mask(lines: list[str], language: str) -> list[bool]:
    """Per line: whether it is code (not blank, not a comment, not inside a docstring or a
    /* */ comment). A heuristic, good enough to pick where a person writes code."""
    mask = []
    in_block = False  # inside a docstring (Python) or a /* */ comment
    for raw in lines:
        s = raw.strip()
        if language == "python":
            quotes = s.count('"""') + s.count("'''")
            was = in_block
            in_block ^= quotes % 2 == 1
            mask.append(bool(s) and not (was or quotes or s.startswith("#")))
        elif in_block or s.startswith("/*"):
            in_block = "*/" not in s
            mask.append(False)
        else:
            mask.append(bool(s) and not s.startswith(("//", "*")))
    return mask


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def end_position(prefix: str) -> types.Position:
    """The LSP position (UTF-16) of the end of `prefix`: the cursor after it."""
    line = prefix.count("\n")
    return types.Position(line, utf16_len(prefix[prefix.rfind("\n") + 1 :]))


def did_open(client: DemoClient, uri: str, language_id: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language_id, version=1, text=text
            )
        )
    )


def did_close(client: DemoClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def did_insert(client: DemoClient, uri: str, version: int, at: types.Position, text: str) -> None:
    """One incremental edit: `text` inserted at `at` (what VS Code sends for a key or an accept)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)
            ],
        )
    )


def did_focus(client: DemoClient, uri: str, at: types.Position) -> None:
    client.protocol.notify(
        DID_FOCUS,
        {"textDocument": {"uri": uri}, "position": {"line": at.line, "character": at.character}},
    )


def cancel(client: DemoClient, msg_id: str) -> None:
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))


@dataclass
class Asked:
    """One inline-completion request as the client saw it."""

    msg_id: str
    sent: float  # perf_counter
    future: asyncio.Future
    arrived: float | None = None  # when the response (any) came back
    items: list[types.InlineCompletionItem] = field(default_factory=list)
    failed: bool = False  # an error response: cancelled, or a server error

    @property
    def latency_ms(self) -> float | None:
        return None if self.arrived is None else (self.arrived - self.sent) * 1000

    @property
    def shown(self) -> str:
        return self.items[0].insert_text if self.items else ""  # type: ignore[return-value]


def ask_inline(client: DemoClient, uri: str, at: types.Position, msg_id: str) -> Asked:
    """An automatic inline-completion request (as VS Code sends while typing); the answer and
    its arrival time are recorded on the returned Asked as soon as the response is read."""
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=at,
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic
        ),
    )
    sent = time.perf_counter()
    fut = asyncio.wrap_future(
        client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
    )
    asked = Asked(msg_id, sent, fut)

    def done(f: asyncio.Future) -> None:
        asked.arrived = time.perf_counter()
        try:
            result = f.result()
        except BaseException:  # cancelled request, or an error response
            asked.failed = True
            return
        asked.items = list(result.items) if result is not None and result.items else []

    fut.add_done_callback(done)
    return asked


def percentile(values: list[float], q: float) -> float | None:
    """inference.metrics.percentile (q in 0..1) as the benchmarks print it: rounded to 0.1, None
    for no values."""
    return round(metrics.percentile(values, q), 1) if values else None


def human_gaps(typed: str, seed: int) -> list[float]:
    """The pause before each character's key: a steady typist (log-normal, median ~135 ms), and
    0.3-0.9 s more at a newline (reading the line back, thinking about the next)."""
    rng = random.Random(seed)
    gaps = []
    for ch in typed:
        gap = rng.lognormvariate(-2.0, 0.4)
        if ch == "\n":
            gap += rng.uniform(0.3, 0.9)
        gaps.append(gap)
    return gaps
