"""Shared pieces of the LSP end-to-end tests: a real pytest-lsp client against `fastcomplete serve`."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from lsp_server.completion.postprocess import CONTROL_TOKEN

SERVER = [sys.executable, "-m", "lsp_server.cli", "serve"]
# The server gets a home of its own (its completion cache starts empty every run) and is pointed
# at the models built in the user's home through settings, as an editor user could do. The models
# themselves come from the `tiny_model` and `real_model` fixtures: nothing is built at import.
SERVER_HOME = tempfile.mkdtemp(prefix="fastcomplete-lsp-")


def config(**env: str) -> ClientServerConfig:
    """The server's whole environment: its home, and no KV store (a prompt one test stored
    would be warm for the next; tests/lsp/test_kv_store_e2e.py turns it on)."""
    return ClientServerConfig(
        server_command=SERVER,
        server_env={"FASTCOMPLETE_HOME": SERVER_HOME, "FASTCOMPLETE_KV_STORE_MB": "0", **env},
    )


def capabilities() -> types.ClientCapabilities:
    """VS Code's capabilities plus LSP 3.18 inline completion, as VS Code's client sends."""
    caps = client_capabilities("visual-studio-code")
    caps.text_document.inline_completion = types.InlineCompletionClientCapabilities()
    caps.window.work_done_progress = True
    caps.workspace.configuration = True
    caps.workspace.apply_edit = True
    return caps


def model_options(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "fastModelPath": str(root / "fast"),
        "standardModelPath": str(root / "standard"),
        "debounceMs": 0,
        "preloadStandard": True,  # most tests use both models; test_lazy_standard does not
        # What the model suggests, not what this person's gate lets through (test_quality_e2e
        # turns it on).
        "showGate": False,
        **extra,
    }


async def start(
    client: LanguageClient, options: dict[str, Any], caps=None, root: Path | None = None
) -> None:
    """Initialize the session; `root`: the workspace folder the editor has open."""
    applied: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    client.applied_edits = applied  # type: ignore[attr-defined]
    statuses: list[dict[str, Any]] = []

    @client.feature("fastcomplete/status")
    def status(params: Any) -> None:  # pygls hands custom params over as a namedtuple
        statuses.append(params._asdict() if hasattr(params, "_asdict") else params)

    client.statuses = statuses  # type: ignore[attr-defined]
    folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)] if root else None
    client.init_result = await client.initialize_session(  # type: ignore[attr-defined]
        types.InitializeParams(
            capabilities=caps or capabilities(),
            initialization_options=options,
            root_uri=root.as_uri() if root else None,
            workspace_folders=folders,
        )
    )


async def command(client: LanguageClient, name: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(args))
    )


def explain_reports(client: LanguageClient) -> list[types.WorkDoneProgressReport]:
    """The progress reports an explanation streamed, in order."""
    return [
        v
        for token, values in client.progress_reports.items()
        if "explain" in str(token)
        for v in values
        if isinstance(v, types.WorkDoneProgressReport)
    ]


async def wait_ready(client: LanguageClient, timeout: float = 120.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        stats = await command(client, "fastcomplete.stats")
        loaded = stats.get("kv_cache_bytes", {})
        if stats["modelsReady"] and len(loaded) == 2:
            return stats
        await asyncio.sleep(0.2)
    raise TimeoutError("models did not load")


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language, version=1, text=text
            )
        )
    )


def insert(client: LanguageClient, uri: str, version: int, line: int, char: int, text: str) -> None:
    pos = types.Position(line, char)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=text)
            ],
        )
    )


async def inline(client: LanguageClient, uri: str, line: int, char: int, invoked: bool = False):
    """An inline completion request, as the editor sends while typing (or, `invoked`, when the
    user asks for one)."""
    kind = types.InlineCompletionTriggerKind
    return await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, char),
            context=types.InlineCompletionContext(
                trigger_kind=kind.Invoked if invoked else kind.Automatic
            ),
        )
    )


def _texts(answer: Any) -> list[str]:
    items = getattr(answer, "items", answer) or []
    texts = []
    for item in items if isinstance(items, list) else []:
        insert = getattr(item, "insert_text", None)
        texts.append(getattr(insert, "value", insert) or "")
        edit = getattr(item, "text_edit", None)
        texts.append(getattr(edit, "new_text", "") or "")
        texts.append(getattr(item, "label", "") or "")
    return texts


def leaked_tokens(answer: Any) -> list[str]:
    """Special tokens spelled in any item of a completion answer."""
    return [m.group(0) for text in _texts(answer) for m in CONTROL_TOKEN.finditer(text)]
