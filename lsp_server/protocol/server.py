"""The LSP handlers: each gets what it needs from the request, calls the completion service, and
turns the answer into LSP (the way jedi-language-server's handlers call jedi_utils).

One completion request, one direction: handler -> service.complete (policy, snapshot with its
incrementally parsed tree) -> completion.plan_for_engine (context, route, token ids) -> engine
(model on a worker thread, cancellable) -> completion.run_completion (post-processing, syntax
check) -> handler -> InlineCompletionList.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lsprotocol import types

from inference.engine import EngineConfig
from lsp_server.config.editors import record_editor
from lsp_server.config.settings import Settings
from lsp_server.errors import BadRequest
from lsp_server.inline.answers import Answer, Selected
from lsp_server.protocol.transport import Server, is_loopback, plain
from lsp_server.service import CompletionService
from lsp_server.text.positions import position_at
from lsp_server.text.uris import file_path

log = logging.getLogger(__name__)

CMD_EXPLAIN = "fastcomplete.explain"
CMD_REFACTOR = "fastcomplete.refactor"
CMD_TOGGLE = "fastcomplete.toggleFastMode"
CMD_STATS = "fastcomplete.stats"
CMD_ACCEPTED = "fastcomplete.accepted"
CMD_DEBUG_DOCUMENT = "fastcomplete.debugDocument"  # the server's view of a document, for tests
# client -> server notification: {textDocument: {uri}, position?: {line, character}}, sent when
# the cursor rests (debounced); the server warms the prompt there.
DID_FOCUS = "fastcomplete/didFocus"
# client -> server notification: {textDocument: {uri}, acceptedLength, kind: "word" | "line",
# position?, text?}, sent when the user accepts part of a suggestion (as Copilot's
# didPartiallyAcceptCompletion); with where the accepted part starts and what it is, its
# retention is watched too.
DID_PARTIALLY_ACCEPT = "fastcomplete/didPartiallyAccept"


def inline_items(
    uri: str, answer: Answer, selected: types.SelectedCompletionInfo | None = None
) -> list[types.InlineCompletionItem]:
    """The answer as items. After a suggest widget's selected item, each item replaces that
    item's range and starts with its text (else the editor does not show it)."""
    prefix, rng = "", types.Range(*(types.Position(answer.line, answer.character),) * 2)
    if selected is not None:
        prefix, rng = selected.text, selected.range
    return [
        types.InlineCompletionItem(
            insert_text=prefix + text,
            range=rng,  # one line, as the spec asks
            command=accepted_command(uri, answer, prefix + text, rng.start),
        )
        for text in answer.items
    ]


def accepted_command(
    uri: str, answer: Answer, text: str, start: types.Position | None = None
) -> types.Command:
    """Run by the editor when the whole item is accepted: counted, and where and what it put
    in the document is watched for retention."""
    start = start or types.Position(answer.line, answer.character)
    return types.Command(
        title="fastcomplete: accepted",
        command=CMD_ACCEPTED,
        arguments=[
            {
                "uri": uri,
                "model": answer.model_id,
                "chars": len(text),
                "line": start.line,
                "character": start.character,
                "text": text,
            }
        ],
    )


def selected_item(params: types.InlineCompletionParams) -> Selected | None:
    info = params.context.selected_completion_info
    if info is None:
        return None
    rng = info.range
    return Selected(rng.start.line, rng.start.character, rng.end.line, rng.end.character, info.text)


def focus_params(params: Any) -> tuple[str, int | None, int | None]:
    """(uri, line, character) of a didFocus notification; BadRequest when malformed."""
    try:
        uri = params["textDocument"]["uri"]
        position = params.get("position")
        line = None if position is None else int(position["line"])
        character = None if position is None else int(position["character"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRequest(
            f"{DID_FOCUS} expects {{textDocument: {{uri}}, position?: {{line, character}}}}"
        ) from exc
    if not isinstance(uri, str) or (line is not None and (line < 0 or character < 0)):
        raise BadRequest(f"{DID_FOCUS}: a document uri and a position inside it")
    return uri, line, character


def range_json(start: types.Position, end: types.Position) -> dict[str, Any]:
    return {
        "start": {"line": start.line, "character": start.character},
        "end": {"line": end.line, "character": end.character},
    }


def create_server(engine_config: EngineConfig | None = None) -> Server:
    server = Server(CompletionService(engine_config=engine_config))
    register(server)
    return server


def initialize(ls: Server, params: types.InitializeParams) -> None:
    ls.service.apply_settings(params.initialization_options)
    if params.client_info is not None:
        ls.client_name = params.client_info.name
    _remember_settings(ls)
    ls.workspace_root = workspace_root(params)
    ls.service.use_workspace(ls.workspace_root)


async def initialized(ls: Server, params: types.InitializedParams) -> None:
    workspace = ls.client_capabilities.workspace
    if workspace and workspace.configuration:
        try:
            await _pull_settings(ls)
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
    observer = ls.exporter.observe if ls.exporter is not None else None

    async def load() -> None:  # in the background: a client slow to grant progress waits alone
        progress = await ls.progress("load", "fastcomplete: loading models")
        await ls.service.load_models(progress, observer)

    ls.service.spawn(load())
    if ls.workspace_root is not None and ls.service.settings.workspaceIndex:
        ls.service.spawn(_start_index(ls, ls.workspace_root))


def did_save(ls: Server, params: types.DidSaveTextDocumentParams) -> None:
    ls.service.indexer.saved(params.text_document.uri)


def did_change_watched_files(ls: Server, params: types.DidChangeWatchedFilesParams) -> None:
    ls.service.indexer.changed(change.uri for change in params.changes)


async def did_change_configuration(ls: Server, params: types.DidChangeConfigurationParams) -> None:
    if params.settings is not None and params.settings != {}:
        ls.service.apply_settings(params.settings)
    else:
        await _pull_settings(ls)
    _remember_settings(ls)


def did_open(ls: Server, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    ls.service.open(doc.uri, doc.text, doc.version, doc.language_id or "")


def did_change(ls: Server, params: types.DidChangeTextDocumentParams) -> None:
    doc = params.text_document
    ls.service.change(doc.uri, doc.version, params.content_changes)


def did_close(ls: Server, params: types.DidCloseTextDocumentParams) -> None:
    ls.service.close(params.text_document.uri)


def did_focus(ls: Server, params: Any) -> None:
    try:
        uri, line, character = focus_params(plain(params))
    except BadRequest as exc:  # a notification has no response to carry the error
        log.warning("ignored: %s", exc)
        ls.tell_once(f"fastcomplete ignored a malformed {DID_FOCUS} notification")
        return
    ls.service.focus(uri, line, character)


def did_partially_accept(ls: Server, params: Any) -> None:
    raw = plain(params)
    try:
        length, kind = int(raw["acceptedLength"]), str(raw.get("kind", "word"))
    except (KeyError, TypeError, ValueError):  # a notification has no response to carry it
        log.warning("ignored a malformed %s notification", DID_PARTIALLY_ACCEPT)
        ls.tell_once(f"fastcomplete ignored a malformed {DID_PARTIALLY_ACCEPT} notification")
        return
    position, doc = raw.get("position"), raw.get("textDocument")
    position = position if isinstance(position, dict) else {}
    uri = doc.get("uri") if isinstance(doc, dict) else None
    ls.service.partially_accepted(
        kind, length, uri, position.get("line"), position.get("character"), raw.get("text")
    )


async def inline_completion(
    ls: Server, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    uri, pos = params.text_document.uri, params.position
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    selected = selected_item(params)
    answer = await ls.service.complete(uri, pos.line, pos.character, invoked, selected)
    items = inline_items(uri, answer, params.context.selected_completion_info) if answer else []
    return types.InlineCompletionList(items=items)


async def completion(ls: Server, params: types.CompletionParams) -> types.CompletionList:
    """For clients without inline completion: one item carrying the whole completion."""
    doc_caps = ls.client_capabilities.text_document
    if doc_caps is not None and doc_caps.inline_completion is not None:
        return types.CompletionList(is_incomplete=False, items=[])
    uri, pos = params.text_document.uri, params.position
    answer = await ls.service.complete(uri, pos.line, pos.character)
    if answer is None:
        return types.CompletionList(is_incomplete=True, items=[])
    anchor = types.Position(answer.line, answer.character)
    item = types.CompletionItem(
        label=answer.text.split("\n", 1)[0].strip()[:60] or answer.text.strip()[:60],
        kind=types.CompletionItemKind.Snippet,
        detail=f"fastcomplete ({answer.variant})",
        insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=types.Range(anchor, anchor), new_text=answer.text),
        command=accepted_command(uri, answer, answer.text),
        sort_text="0",
    )
    return types.CompletionList(is_incomplete=True, items=[item])


def code_action(ls: Server, params: types.CodeActionParams) -> list[types.CodeAction]:
    rng = params.range
    if rng.start == rng.end:
        return []
    arg = {"uri": params.text_document.uri, "range": range_json(rng.start, rng.end)}
    command = types.Command("Rewrite with fastcomplete", CMD_REFACTOR, arguments=[arg])
    return [
        types.CodeAction(
            title="Rewrite with fastcomplete (standard model)",
            kind=types.CodeActionKind.RefactorRewrite,
            command=command,
        )
    ]


async def explain(ls: Server, *args: Any) -> dict[str, Any]:
    sel = ls.service.chat.selection(list(args))
    async with ls.streamed("explain", "fastcomplete: explaining") as (on_text, cancel):
        return await ls.service.chat.explain(sel, on_text, cancel)


async def refactor(ls: Server, *args: Any) -> dict[str, Any]:
    sel = ls.service.chat.selection(list(args))
    async with ls.streamed("refactor", "fastcomplete: rewriting") as (on_text, cancel):
        rewrite = await ls.service.chat.rewrite(sel, on_text, cancel)
    if rewrite.text is None:
        return {"applied": False, "reason": rewrite.reason, "model": rewrite.model}
    start, end = (types.Position(*position_at(sel.snapshot.text, o)) for o in sel.span)
    edit = types.TextEdit(range=types.Range(start, end), new_text=rewrite.text)
    response = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(
            edit=types.WorkspaceEdit(changes={sel.snapshot.uri: [edit]}),
            label="fastcomplete rewrite",
        )
    )
    ls.service.telemetry.counts["refactors_applied"] += bool(response.applied)
    return {"applied": bool(response.applied), "model": rewrite.model}


def toggle(ls: Server, *args: Any) -> dict[str, bool]:
    return ls.service.toggle_fast_mode()


def stats(ls: Server, *args: Any) -> dict[str, Any]:
    return ls.service.stats()


def debug_document(ls: Server, *args: Any) -> dict[str, Any]:
    return ls.service.debug_document(args)


def accepted(ls: Server, *args: Any) -> None:
    ls.service.accepted(args)


# (method, options or None, handler): options make pygls advertise a capability.
FEATURES: tuple[tuple[str, Any, Callable[..., Any]], ...] = (
    (types.INITIALIZE, None, initialize),
    (types.INITIALIZED, None, initialized),
    (types.TEXT_DOCUMENT_DID_SAVE, None, did_save),
    (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, did_change_watched_files),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (DID_FOCUS, None, did_focus),
    (DID_PARTIALLY_ACCEPT, None, did_partially_accept),
    (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions(), inline_completion),
    (types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False), completion),
    (
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite]),
        code_action,
    ),
)
COMMANDS: dict[str, Callable[..., Any]] = {
    CMD_EXPLAIN: explain,
    CMD_REFACTOR: refactor,
    CMD_TOGGLE: toggle,
    CMD_STATS: stats,
    CMD_DEBUG_DOCUMENT: debug_document,
    CMD_ACCEPTED: accepted,
}


def register(server: Server) -> None:
    """Every LSP feature and command of the server, each a plain handler above."""
    for method, options, handler in FEATURES:
        server.feature(method, options)(handler)
    for command, handler in COMMANDS.items():
        server.command(command)(handler)


def workspace_root(params: types.InitializeParams) -> Path | None:
    """The folder to index: the first workspace folder, else the (deprecated) rootUri."""
    folders = params.workspace_folders or []
    uri = folders[0].uri if folders else params.root_uri
    if uri is None and params.root_path:
        return Path(params.root_path)
    path = file_path(uri) if uri else None
    return path if path is not None and path.is_dir() else None


async def _start_index(ls: Server, root: Path) -> None:
    """Index the workspace in the background, with work-done progress when the client shows it,
    and ask the client to report file changes (dynamic registration) to keep it current."""
    report = await ls.progress("index", "fastcomplete: indexing the workspace")
    loop = asyncio.get_running_loop()

    def progress(message: str, percentage: int | None) -> None:  # called from the index thread
        if report is not None:
            loop.call_soon_threadsafe(report, message, percentage)

    ls.service.indexer.start(root, progress)
    for problem in ls.service.indexer.exclusions.problems:
        ls.service.notices.tell_once(f"fastcomplete: {problem}")
    watched = (
        ls.client_capabilities.workspace
        and ls.client_capabilities.workspace.did_change_watched_files
    )
    if watched and watched.dynamic_registration:
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern="**/*")]
        )
        registration = types.Registration(
            id="fastcomplete-watched-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=options,
        )
        try:
            await ls.client_register_capability_async(
                types.RegistrationParams(registrations=[registration])
            )
        except Exception as exc:  # saves still keep the index current
            log.warning("could not register for file changes: %s", exc)


def _remember_settings(ls: Server) -> None:
    """The settings this editor changed from the defaults, for `fastcomplete doctor`."""
    defaults = asdict(Settings())
    changed = {k: v for k, v in asdict(ls.service.settings).items() if defaults.get(k) != v}
    record_editor(ls.client_name, changed)


async def _pull_settings(ls: Server) -> None:
    config = await ls.workspace_configuration_async(
        types.ConfigurationParams(items=[types.ConfigurationItem(section="fastcomplete")])
    )
    ls.service.apply_settings(config[0] if config else None)


def serve(
    tcp: str | None = None,
    engine_config: EngineConfig | None = None,
    metrics_port: int | None = None,
    allow_remote: bool = False,
) -> None:
    server = create_server(engine_config)
    if metrics_port is not None:
        from lsp_server.telemetry.observability import PrometheusExporter

        server.exporter = PrometheusExporter(lambda: dict(server.service.telemetry.counts))
        server.exporter.serve(metrics_port)
    if not tcp:
        server.start_io()
        return
    host, _, port = tcp.rpartition(":")
    host = host or "127.0.0.1"
    if not is_loopback(host):
        if not allow_remote:
            raise BadRequest(
                f"--tcp {tcp}: {host} is not a loopback address; anyone who can reach it could "
                "read the code you complete. Use 127.0.0.1, or add --allow-remote-host"
            )
        log.warning("listening on %s: any machine that can reach it can use this server", host)
    server.start_tcp(host, int(port))
