"""The pygls language server: thin handlers that translate LSP to the plain functions beside them.

Data flows one way: LSP request -> context and prompt (completion.plan_completion) -> engine on a
worker thread, cancellable -> post-process and syntax check (completion.run_completion) -> LSP
response.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer

from inference.engine import Engine, EngineConfig, EngineResult
from inference.generate import Finish
from inference.model import ModelLoadError
from inference.remote import RemoteConfig
from inference.router import FAST, REMOTE, STANDARD, RoutingError, Task
from lsp_server import __version__
from lsp_server.completion import (
    Completion,
    CompletionPlan,
    plan_for_engine,
    prompt_path,
    run_completion,
)
from lsp_server.context import Snippet
from lsp_server.jsonrpc import read_frames
from lsp_server.positions import (
    LINE_BREAK,
    PositionError,
    clamp_character,
    offset_at,
    utf16_len,
)
from lsp_server.prompts import (
    EXPLAIN_CONFIG,
    REFACTOR_CONFIG,
    Messages,
    explain_messages,
    extract_code,
    refactor_messages,
    render_chatml,
)
from lsp_server.protocol import REQUEST_ID, REQUEST_PARAMS, Protocol
from lsp_server.scheduler import Gate, LatestWins
from lsp_server.settings import Settings, merge
from lsp_server.snippets import pick_snippets
from lsp_server.syntax import syntax_issues

log = logging.getLogger(__name__)

CMD_EXPLAIN = "fastcomplete.explain"
CMD_REFACTOR = "fastcomplete.refactor"
CMD_TOGGLE = "fastcomplete.toggleFastMode"
CMD_STATS = "fastcomplete.stats"
CMD_ACCEPTED = "fastcomplete.accepted"
CMD_DEBUG_DOCUMENT = "fastcomplete.debugDocument"  # the server's view of a document, for tests
WARM_DELAY_S = 0.25  # idle time after an edit before the KV cache is warmed there
LARGE_DOC_CHARS = 1 << 20  # beyond this, completions look at the text around the cursor only
AROUND_BEFORE, AROUND_AFTER = 512 << 10, 64 << 10
RECENT_DOCS = 8  # other open/edited documents that may lend snippets to the prompt
SNIPPET_SHARE = 5  # at most 1/5 of the prompt budget goes to other files' snippets


@dataclass(frozen=True)
class Snapshot:
    """A document as it was when a request arrived: worker threads never see later edits."""

    uri: str
    text: str
    language_id: str


def around_cursor(text: str, position: types.Position) -> tuple[str, types.Position]:
    """For very large documents: the text within a few hundred KB of the cursor, and the cursor's
    position in that excerpt (parsing 10 MB per keystroke would stall completions)."""
    offset = offset_at(text, position.line, position.character)  # PositionError past the end
    start = max(0, offset - AROUND_BEFORE)
    line_start = LINE_BREAK.search(text, start, offset)
    if start and line_start:
        start = line_start.end()  # begin on a whole line when there is one
    before = text[start:offset]
    breaks = list(LINE_BREAK.finditer(before))
    column = before[breaks[-1].end() :] if breaks else before
    excerpt = text[start : offset + AROUND_AFTER]
    return excerpt, types.Position(len(breaks), utf16_len(column))


class FastcompleteServer(LanguageServer):
    def __init__(self, engine_config: EngineConfig | None = None) -> None:
        super().__init__("fastcomplete", __version__, protocol_cls=Protocol, max_workers=4)
        self.settings = Settings()
        self.engine_config = engine_config
        self.engine: Engine | None = None
        self.models_ready = threading.Event()
        self.counts: Counter = Counter()
        self.latest = LatestWins()
        self.warmups = LatestWins()
        self.gate = Gate()
        # Model work: completions, warm-ups and one chat task can run side by side.
        self.model_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="model")
        self.command_cancels: dict[Any, threading.Event] = {}
        self.recent: OrderedDict[str, None] = OrderedDict()  # most recently used last
        self._snippets: dict[tuple, list[Snippet]] = {}
        self._shown: set[str] = set()
        self.exporter: Any = None  # a PrometheusExporter when --metrics-port is given
        self._background: set[asyncio.Task] = set()

    # -- transport ------------------------------------------------------------------------------
    # pygls's read loops are replaced by lsp_server.jsonrpc.read_frames, which survives bad
    # headers; each frame goes to Protocol.receive, which answers malformed messages.

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._stop_event = threading.Event()
        reader = StdinAsyncReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(self._read(reader.readline, reader.readexactly))
        except BrokenPipeError:
            log.error("the connection to the editor is lost: shutting down")
        except KeyboardInterrupt:
            pass
        finally:  # `exit` raises SystemExit: 0 after `shutdown`, 1 without (the LSP's codes)
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        self._stop_event = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await self._read(reader.readline, reader.readexactly)
            self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s:%s", host, port)
            async with self._server:
                await self._server.serve_forever()

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(listen())

    async def _read(
        self, readline: Callable[[], Awaitable[bytes]], read: Callable[[int], Awaitable[bytes]]
    ) -> None:
        protocol, stop = self.protocol, self._stop_event
        assert isinstance(protocol, Protocol)
        async for item in read_frames(readline, read):
            if stop is not None and stop.is_set():
                break
            protocol.receive(item)

    # -- messages -------------------------------------------------------------------------

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        log.log(logging.WARNING if kind <= types.MessageType.Warning else logging.INFO, message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def tell_once(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        if message not in self._shown:
            self._shown.add(message)
            self.tell(message, kind)

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def in_model_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.model_pool, functools.partial(fn, *args, **kwargs))

    # -- settings and models ------------------------------------------------------------------

    def apply_settings(self, raw: Any) -> None:
        before = self.settings.fastMode
        self.settings, errors = merge(self.settings, raw)
        for error in errors:
            self.tell(f"fastcomplete: invalid setting {error}")
        if self.settings.fastMode != before:
            log.info("fast mode %s", "on" if self.settings.fastMode else "off")

    def make_engine(self) -> Engine:
        if self.engine_config is not None:
            return Engine(self.engine_config)
        fast = self.settings.fastModelPath
        standard = self.settings.standardModelPath
        return Engine(
            EngineConfig(
                fast_dir=Path(fast).expanduser() if fast else None,
                standard_dir=Path(standard).expanduser() if standard else None,
                remote=remote_config(self.settings.remote),
                verify_hashes=True,  # a corrupt model is caught while loading, not mid-request
            )
        )

    async def load_models(self) -> None:
        """Load both models in the background, reporting work-done progress when supported."""
        self.engine = self.make_engine()
        if self.exporter is not None:
            self.engine.metrics.add_observer(self.exporter.observe)
        if self.engine.cache.problem:
            self.tell_once(f"fastcomplete: {self.engine.cache.problem}")
        token = "fastcomplete/load"
        progress = self._supports_progress()
        if progress:
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(
                    token, types.WorkDoneProgressBegin(title="fastcomplete: loading models")
                )
            except Exception:  # a client that refuses progress still gets completions
                progress = False
        missing = []
        for i, variant in enumerate((FAST, STANDARD)):
            try:
                await self.in_model_thread(self.engine.load, variant)
                self.models_ready.set()
            except ModelLoadError as exc:
                missing.append(f"{variant} model: {exc}")
            if progress:
                self.work_done_progress.report(
                    token,
                    types.WorkDoneProgressReport(
                        message=f"{variant} ready", percentage=50 * i + 50
                    ),
                )
        if progress:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="models loaded"))
            self.work_done_progress.tokens.pop(token, None)
        for problem in missing:
            self.tell_once(f"fastcomplete: {problem}", types.MessageType.Error)

    def _supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

    # -- completions --------------------------------------------------------------------------

    def document(self, uri: str):
        # pygls files documents under the percent-decoded URI ("my%20project" -> "my project").
        doc = self.workspace.text_documents.get(unquote(uri))
        if doc is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: send textDocument/didOpen first")
        return doc

    def touch(self, uri: str) -> None:
        self.recent[uri] = None
        self.recent.move_to_end(uri)
        while len(self.recent) > RECENT_DOCS:
            self.recent.popitem(last=False)

    def snippets_for(self, uri: str, text: str, line: int) -> list[Snippet]:
        """Snippets from other recent documents, chosen once per 64-line block of the cursor so
        that the prompt's start stays put while the user types (KV reuse)."""
        others = {
            u: d for u in self.recent if u != uri and (d := self.workspace.text_documents.get(u))
        }
        if not others:
            return []
        block = line // 64
        key = (uri, block, tuple((u, d.version) for u, d in others.items()))
        if key not in self._snippets:
            if len(self._snippets) > 64:
                self._snippets.clear()
            query = "\n".join(text.split("\n")[block * 64 : block * 64 + 64])
            budget = self.settings.contextTokens * 3 // SNIPPET_SHARE
            sources = {prompt_path(u): d.source for u, d in others.items()}
            self._snippets[key] = pick_snippets(query, sources, budget)
        return self._snippets[key]

    def plan(self, snap: Snapshot, position: types.Position) -> CompletionPlan:
        """Raises PositionError. Runs on a worker thread: parsing and token counting."""
        return plan_for_engine(
            self.engine,
            snap.text,
            position.line,
            position.character,
            self.settings,
            language_id=snap.language_id,
            path=prompt_path(snap.uri),
            snippets=self.snippets_for(snap.uri, snap.text, position.line),
        )

    def plan_and_run(
        self, snap: Snapshot, position: types.Position, cancel: threading.Event
    ) -> Completion:
        plan = self.plan(snap, position)
        return run_completion(
            self.engine,
            plan,
            snap.text,
            snap.language_id,
            fast_mode=self.settings.fastMode,
            cancel=cancel,
        )

    async def complete(self, uri: str, position: types.Position) -> tuple[str, EngineResult] | None:
        """The completion at `position`, or None (disabled, not ready, superseded, empty)."""
        self.counts["requests"] += 1
        doc = self.document(uri)
        if not self.settings.enabled_for(doc.language_id or ""):
            self.counts["disabled"] += 1
            return None
        if not self.models_ready.is_set() or self.engine is None:
            self.counts["not_ready"] += 1
            return None
        text = doc.source
        if "\x00" in text:
            self.counts["refused_binary"] += 1
            self.tell_once(f"fastcomplete: {uri} holds binary data (NUL bytes): no completions")
            return None
        if len(text) > LARGE_DOC_CHARS:
            self.counts["trimmed_large"] += 1
            self.tell_once(
                f"fastcomplete: {uri} is large ({len(text) >> 20} MB): completions use the "
                "text around the cursor only",
                types.MessageType.Info,
            )
            try:
                text, position = around_cursor(text, position)
            except PositionError as exc:
                self.counts["bad_position"] += 1
                raise JsonRpcInvalidParams(f"{uri}: {exc}") from exc
        self.warmups.cancel(uri)
        version = doc.version
        ticket = self.latest.begin(uri)
        try:
            await asyncio.sleep(self.settings.debounceMs / 1000)
            if not self.latest.is_current(ticket):
                self.counts["stale_dropped"] += 1
                return None
            with self.gate.foreground():
                snap = Snapshot(uri, text, doc.language_id or "")
                done = await self.in_model_thread(self.plan_and_run, snap, position, ticket.cancel)
        except PositionError as exc:
            self.counts["bad_position"] += 1
            raise JsonRpcInvalidParams(f"{uri}: {exc}") from exc
        except asyncio.CancelledError:
            ticket.cancel.set()  # the worker thread stops at its next forward pass
            self.counts["cancelled"] += 1
            raise
        except RoutingError as exc:
            self.counts["errors"] += 1
            self.tell_once(f"fastcomplete: no model could complete: {exc}", types.MessageType.Error)
            return None
        finally:
            self.latest.finish(ticket)
        result = done.result
        self.counts["quality_fallbacks"] += done.syntax_rejected
        self.counts["standard_retries"] += done.retried_on_standard
        if result is not None and result.finish is Finish.CANCELLED:
            self.counts["cancelled"] += 1
            return None
        if ticket.cancel.is_set() or self.document(uri).version != version:
            self.counts["stale_dropped"] += 1  # the document moved on while we generated
            return None
        self.counts["cache_hits"] += bool(result and result.cached)
        if not done.text:
            self.counts["empty"] += 1
            return None
        self.counts["answered"] += 1
        if result is not None and result.fallback:
            preferred = FAST if self.settings.fastMode else STANDARD
            reason = self.engine.router.last_errors.get(preferred, "circuit open")
            self.tell_once(
                f"fastcomplete: the {preferred} model failed ({reason}); "
                f"completions come from the {result.variant} model for now"
            )
        if self.settings.debug:
            log.info("completion %s:%d:%d -> %r", uri, position.line, position.character, done.text)
        return done.text, result

    def clamped(self, uri: str, position: types.Position) -> types.Position:
        """The position an item is anchored at: a character past the line's end means its end."""
        character = clamp_character(self.document(uri).source, position.line, position.character)
        return types.Position(position.line, character)

    def inline_items(
        self, uri: str, position: types.Position, text: str, result: EngineResult
    ) -> list[types.InlineCompletionItem]:
        accepted = types.Command(
            title="fastcomplete: accepted",
            command=CMD_ACCEPTED,
            arguments=[{"uri": uri, "model": result.model_id, "chars": len(text)}],
        )
        return [
            types.InlineCompletionItem(
                insert_text=text,
                range=types.Range(start=position, end=position),  # one line, as the spec asks
                command=accepted,
            )
        ]

    # -- idle warm-up ---------------------------------------------------------------------------

    def schedule_warm(self, uri: str, line: int, character: int) -> None:
        if self.engine is None or not self.models_ready.is_set():
            return
        self.spawn(self._warm(uri, line, character))

    async def _warm(self, uri: str, line: int, character: int) -> None:
        ticket = self.warmups.begin(uri)
        try:
            await asyncio.sleep(WARM_DELAY_S)
            doc = self.workspace.text_documents.get(unquote(uri))
            if doc is None or not self.warmups.is_current(ticket) or self.gate.busy:
                return
            if not self.settings.enabled_for(doc.language_id or ""):
                return
            text, position = doc.source, types.Position(line, character)
            if "\x00" in text:
                return
            if len(text) > LARGE_DOC_CHARS:
                text, position = around_cursor(text, position)
            snap = Snapshot(uri, text, doc.language_id or "")
            plan = await self.in_model_thread(self.plan, snap, position)
            if plan.prompt.strip():
                await self.in_model_thread(
                    self.engine.warm,
                    plan.prompt,
                    fast_mode=self.settings.fastMode,
                    cancel=ticket.cancel,
                )
        except (PositionError, RoutingError, ModelLoadError) as exc:
            log.debug("warm-up skipped: %s", exc)
        except Exception:
            log.exception("warm-up failed")  # idle work must never take the server down
        finally:
            self.warmups.finish(ticket)

    # -- commands -----------------------------------------------------------------------------

    def selection(self, args: list[Any]) -> tuple[Any, str, types.Range]:
        """(document, selected text, range) from [{uri, range}] or [uri, range]."""
        try:
            if len(args) == 1 and isinstance(args[0], dict):
                uri, raw = args[0]["uri"], args[0]["range"]
            else:
                uri, raw = args[0], args[1]
            rng = types.Range(
                start=types.Position(raw["start"]["line"], raw["start"]["character"]),
                end=types.Position(raw["end"]["line"], raw["end"]["character"]),
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise JsonRpcInvalidParams("expected arguments [{uri, range: {start, end}}]") from exc
        doc = self.document(uri)
        try:
            start = offset_at(doc.source, rng.start.line, rng.start.character)
            end = offset_at(doc.source, rng.end.line, rng.end.character)
        except PositionError as exc:
            raise JsonRpcInvalidParams(f"{uri}: {exc}") from exc
        if end < start:
            start, end = end, start
        return doc, doc.source[start:end], rng

    async def run_chat(
        self, task: Task, chat: Messages, config: Any, title: str
    ) -> tuple[EngineResult, bool]:
        """A standard-model generation streamed as work-done progress; (result, cancelled)."""
        if self.engine is None or not self.models_ready.is_set():
            raise JsonRpcInvalidParams("models are still loading; try again in a moment")
        msg_id = REQUEST_ID.get()
        cancel = threading.Event()
        self.command_cancels[msg_id] = cancel
        client_token = getattr(REQUEST_PARAMS.get(), "work_done_token", None)
        token = client_token or f"fastcomplete/{task.value}/{msg_id}"
        progress = client_token is not None or self._supports_progress()
        loop = asyncio.get_running_loop()
        if progress:
            try:
                if client_token is None:
                    await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(
                    token, types.WorkDoneProgressBegin(title=title, cancellable=True)
                )
                self.work_done_progress.tokens[token].add_done_callback(
                    lambda fut: cancel.set() if fut.cancelled() else None
                )
            except Exception:
                progress = False

        def stream(text: str) -> None:
            if progress:
                loop.call_soon_threadsafe(
                    self.work_done_progress.report,
                    token,
                    types.WorkDoneProgressReport(message=text),
                )

        try:
            result = await self.in_model_thread(
                self.engine.generate,
                task,
                render_chatml(chat),
                config,
                fast_mode=self.settings.fastMode,
                cancel=cancel,
                on_text=stream,
                pause=self.gate.pauser(cancel),
                messages=chat,
            )
        finally:
            self.command_cancels.pop(msg_id, None)
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd())
                self.work_done_progress.tokens.pop(token, None)
        if result.fallback and self.settings.remote and result.variant != REMOTE:
            reason = self.engine.router.last_errors.get(REMOTE, "circuit open")
            self.tell_once(
                f"fastcomplete: the remote endpoint failed ({reason}); "
                "using the local standard model"
            )
        return result, result.finish is Finish.CANCELLED


def create_server(engine_config: EngineConfig | None = None) -> FastcompleteServer:
    server = FastcompleteServer(engine_config)
    register(server)
    return server


def register(server: FastcompleteServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: FastcompleteServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: FastcompleteServer, params: types.InitializedParams) -> None:
        workspace = ls.client_capabilities.workspace
        if workspace and workspace.configuration:
            try:
                config = await ls.workspace_configuration_async(
                    types.ConfigurationParams(
                        items=[types.ConfigurationItem(section="fastcomplete")]
                    )
                )
                ls.apply_settings(config[0] if config else None)
            except Exception as exc:
                log.warning("workspace/configuration failed: %s", exc)
        ls.spawn(ls.load_models())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: FastcompleteServer, params: types.DidChangeConfigurationParams
    ) -> None:
        if params.settings is not None and params.settings != {}:
            ls.apply_settings(params.settings)
            return
        config = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section="fastcomplete")])
        )
        ls.apply_settings(config[0] if config else None)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FastcompleteServer, params: types.DidOpenTextDocumentParams) -> None:
        # The whole document's prefix is what any cursor's prompt starts with: warm it.
        lines = params.text_document.text.split("\n")
        ls.touch(params.text_document.uri)
        ls.schedule_warm(params.text_document.uri, len(lines) - 1, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FastcompleteServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.touch(params.text_document.uri)
        last = params.content_changes[-1] if params.content_changes else None
        if isinstance(last, types.TextDocumentContentChangePartial):
            end = last.range.start
            lines = last.text.split("\n")
            line = end.line + len(lines) - 1
            ls.schedule_warm(params.text_document.uri, line, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FastcompleteServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.latest.cancel(params.text_document.uri)
        ls.warmups.cancel(params.text_document.uri)
        ls.recent.pop(params.text_document.uri, None)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: FastcompleteServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList | None:
        uri = params.text_document.uri
        outcome = await ls.complete(uri, params.position)
        if outcome is None:
            return types.InlineCompletionList(items=[])
        return types.InlineCompletionList(
            items=ls.inline_items(uri, ls.clamped(uri, params.position), *outcome)
        )

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False))
    async def completion(
        ls: FastcompleteServer, params: types.CompletionParams
    ) -> types.CompletionList:
        """For clients without inline completion: one item carrying the whole completion."""
        doc_caps = ls.client_capabilities.text_document
        if doc_caps is not None and doc_caps.inline_completion is not None:
            return types.CompletionList(is_incomplete=False, items=[])
        outcome = await ls.complete(params.text_document.uri, params.position)
        if outcome is None:
            return types.CompletionList(is_incomplete=True, items=[])
        text, result = outcome
        pos = ls.clamped(params.text_document.uri, params.position)
        item = types.CompletionItem(
            label=text.split("\n", 1)[0].strip()[:60] or text.strip()[:60],
            kind=types.CompletionItemKind.Snippet,
            detail=f"fastcomplete ({result.variant})",
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=types.Range(start=pos, end=pos), new_text=text),
            command=ls.inline_items(params.text_document.uri, pos, text, result)[0].command,
            sort_text="0",
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite]),
    )
    def code_action(
        ls: FastcompleteServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        rng = params.range
        if rng.start == rng.end:
            return []
        arg = {"uri": params.text_document.uri, "range": _range_json(rng)}
        return [
            types.CodeAction(
                title="Rewrite with fastcomplete (standard model)",
                kind=types.CodeActionKind.RefactorRewrite,
                command=types.Command(
                    title="Rewrite with fastcomplete", command=CMD_REFACTOR, arguments=[arg]
                ),
            )
        ]

    @server.command(CMD_EXPLAIN)
    async def explain(ls: FastcompleteServer, *args: Any) -> dict[str, Any]:
        doc, code, _ = ls.selection(list(args))
        if not code.strip():
            raise JsonRpcInvalidParams("nothing selected to explain")
        chat = explain_messages(code, doc.language_id or "text")
        result, cancelled = await ls.run_chat(
            Task.EXPLAIN, chat, EXPLAIN_CONFIG, "fastcomplete: explaining"
        )
        ls.counts["explains"] += 1
        return {"markdown": result.text, "model": result.model_id, "cancelled": cancelled}

    @server.command(CMD_REFACTOR)
    async def refactor(ls: FastcompleteServer, *args: Any) -> dict[str, Any]:
        doc, code, rng = ls.selection(list(args))
        if not code.strip():
            raise JsonRpcInvalidParams("nothing selected to rewrite")
        language = doc.language_id or "text"
        result, cancelled = await ls.run_chat(
            Task.REFACTOR,
            refactor_messages(code, language),
            REFACTOR_CONFIG,
            "fastcomplete: rewriting",
        )
        if cancelled:
            return {"applied": False, "reason": "cancelled"}
        rewritten = extract_code(result.text)
        verdict = refactor_verdict(doc.source, code, rewritten, rng, language)
        if verdict is not None:
            ls.counts["refactors_refused"] += 1
            ls.tell(f"fastcomplete: rewrite not applied: {verdict}", types.MessageType.Info)
            return {"applied": False, "reason": verdict, "model": result.model_id}
        edit = types.WorkspaceEdit(
            changes={doc.uri: [types.TextEdit(range=rng, new_text=rewritten)]}
        )
        response = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label="fastcomplete rewrite")
        )
        ls.counts["refactors_applied"] += bool(response.applied)
        return {"applied": bool(response.applied), "model": result.model_id}

    @server.command(CMD_TOGGLE)
    def toggle(ls: FastcompleteServer, *args: Any) -> dict[str, bool]:
        ls.apply_settings({"fastMode": not ls.settings.fastMode})
        return {"fastMode": ls.settings.fastMode}

    @server.command(CMD_STATS)
    def stats(ls: FastcompleteServer, *args: Any) -> dict[str, Any]:
        engine = ls.engine.stats() if ls.engine is not None else {}
        return {
            "fastMode": ls.settings.fastMode,
            "modelsReady": ls.models_ready.is_set(),
            "server": dict(ls.counts),
            **engine,
        }

    @server.command(CMD_DEBUG_DOCUMENT)
    def debug_document(ls: FastcompleteServer, *args: Any) -> dict[str, Any]:
        """What the server holds for a document (its text never leaves the machine)."""
        uri = args[0].get("uri") if args and isinstance(args[0], dict) else None
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams("expected arguments [{uri}]")
        doc = ls.document(uri)
        return {"text": doc.source, "version": doc.version, "languageId": doc.language_id}

    @server.command(CMD_ACCEPTED)
    def accepted(ls: FastcompleteServer, *args: Any) -> None:
        ls.counts["accepted"] += 1
        model = args[0].get("model") if args and isinstance(args[0], dict) else None
        if model:
            ls.counts[f"accepted.{model}"] += 1


def refactor_verdict(
    source: str, selected: str, rewritten: str | None, rng: types.Range, language: str
) -> str | None:
    """Why a rewrite must not be applied, or None when it is safe to apply."""
    if rewritten is None:
        return "the model's answer had no code block"
    if rewritten.strip() == selected.strip():
        return "the model returned the code unchanged"
    start = offset_at(source, rng.start.line, rng.start.character)
    end = offset_at(source, rng.end.line, rng.end.character)
    start, end = min(start, end), max(start, end)
    before = syntax_issues(language, source)
    after = syntax_issues(language, source[:start] + rewritten + source[end:])
    if before is None or after is None:
        return f"no parser for {language!r} to check the rewrite with"
    if len(after) > len(before):
        issue = after[0]
        return f"it would add syntax errors (first at line {issue.line + 1}, column {issue.column + 1})"
    return None


def remote_config(raw: dict[str, Any] | None) -> RemoteConfig | None:
    if not raw:
        return None
    return RemoteConfig(
        url=raw["url"],
        model=raw["model"],
        api_key_env=raw.get("apiKeyEnv"),
        timeout_s=raw.get("timeoutMs", 20_000) / 1000,
        retries=raw.get("retries", 2),
        daily_token_quota=raw.get("dailyTokenQuota", 200_000),
        completions=raw.get("completions", False),
    )


def _range_json(rng: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": rng.start.line, "character": rng.start.character},
        "end": {"line": rng.end.line, "character": rng.end.character},
    }


def serve(
    tcp: str | None = None,
    engine_config: EngineConfig | None = None,
    metrics_port: int | None = None,
) -> None:
    server = create_server(engine_config)
    if metrics_port is not None:
        from lsp_server.observability import PrometheusExporter

        server.exporter = PrometheusExporter(lambda: dict(server.counts))
        server.exporter.serve(metrics_port)
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
