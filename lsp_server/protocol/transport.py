"""Everything that touches pygls: framing, dispatch, cancellation, progress, stdio and TCP.

The only module that reads or overrides pygls's private parts. What pygls's own protocol lacks
for a server that lives in the editor all day:

- every malformed message answered with its JSON-RPC error (see lsp_server.protocol.jsonrpc), and
  requests after `shutdown` refused, as the LSP says;
- text documents kept by the completion service (lsp_server.text.documents), not pygls's workspace;
- executeCommand handlers cancellable by $/cancelRequest;
- no future kept per notification (pygls keeps them all: ~2 KB per keystroke, for ever);
- requests refused for a client error logged in one line, not with a traceback;
- over TCP, one editor per server: a second connection is told so and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import json
import logging
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    RPCRequest,
)

from lsp_server import __version__
from lsp_server.errors import BadRequest
from lsp_server.protocol import jsonrpc
from lsp_server.protocol.jsonrpc import Fault, read_frames
from lsp_server.service import CompletionService

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

log = logging.getLogger(__name__)

# The JSON-RPC id and params of the request being handled: lets executeCommand handlers be
# cancelled, and stream into a progress token the client chose (`workDoneToken`).
REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id", default=None)
REQUEST_PARAMS: contextvars.ContextVar[Any] = contextvars.ContextVar("request_params", default=None)

CLIENT_ERRORS = (JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound, BadRequest)
UNREADABLE = "fastcomplete: the editor sent a message the server could not read (see its log)"
STATUS_NOTIFICATION = "fastcomplete/status"  # server -> client: {state, message, fastMode}
INTERNAL = "fastcomplete: a request failed with an internal error (see the log); still serving"


def describe(exc: Exception) -> str:
    """Why params did not fit their type, in a line: "... @ $.params.position.line"."""
    try:
        reasons = cattrs.transform_error(exc)
    except Exception:
        reasons = [str(exc) or type(exc).__name__]
    return "; ".join(reasons[:3])


class Protocol(LanguageServerProtocol):
    _server: Server

    # -- receiving ------------------------------------------------------------------------------

    def receive(self, item: bytes | Fault) -> None:
        """One frame from the reader: parsed, checked and structured, then dispatched."""
        parsed = item if isinstance(item, Fault) else jsonrpc.parse(item)
        message = self._structure(parsed) if isinstance(parsed, dict) else parsed
        if isinstance(message, Fault):
            self.refuse(message)
            return
        if message is None:
            return
        try:
            self.handle_message(message)
        except Exception as exc:
            log.exception("failed to dispatch %s", getattr(message, "method", "a response"))
            if isinstance(message, RPCRequest):
                self.refuse(Fault(jsonrpc.INTERNAL_ERROR, f"Internal error: {exc}", message.id))

    def refuse(self, fault: Fault) -> None:
        log.warning("refused a message (id %s): %s", fault.msg_id, fault.message)
        self._send_data(fault.response())
        if fault.msg_id is None:  # nobody is waiting for it: the user should hear of it
            self._server.tell_once(UNREADABLE)

    def _structure(self, data: dict[str, Any]) -> Any:
        """The typed message, a Fault for a request that does not fit its method, or None for a
        message dropped with a log line (nothing may answer a notification)."""
        method = data.get("method")
        msg_id = data.get("id")
        if isinstance(method, str):
            msg_type = self.get_message_type(method)
            is_request = msg_type is not None and "id" in attrs.fields_dict(msg_type)
            if "id" in data and msg_type is not None and not is_request:
                return Fault(
                    jsonrpc.INVALID_REQUEST,
                    f"Invalid Request: {method} is a notification and takes no id",
                    msg_id,
                )
            if "id" not in data and is_request:
                log.warning("ignored %s sent as a notification: a request needs an id", method)
                return None
            default = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
            msg_type = msg_type or default
        elif "error" in data:
            msg_type = types.ResponseErrorMessage
        else:
            msg_type = self._result_types.pop(msg_id, None) or JsonRPCResponseMessage
        try:
            return self._converter.structure(data, msg_type)
        except Exception as exc:
            reason = describe(exc)
        if isinstance(method, str) and "id" in data:
            return Fault(jsonrpc.INVALID_PARAMS, f"Invalid params for {method}: {reason}", msg_id)
        if isinstance(method, str):
            log.warning("ignored a malformed %s notification: %s", method, reason)
            self._server.tell_once(f"fastcomplete ignored a malformed {method} notification")
            return None
        future = self._request_futures.pop(msg_id, None)
        log.warning("malformed response to request %s: %s", msg_id, reason)
        if future is not None and not future.done():
            future.set_exception(JsonRpcInternalError(f"malformed response: {reason}"))
        return None

    def handle_message(self, message: Any) -> None:
        if self._shutdown and isinstance(message, RPCRequest) and message.method != types.EXIT:
            fault = Fault(jsonrpc.INVALID_REQUEST, "Invalid Request: shutting down", message.id)
            self.refuse(fault)
            return
        super().handle_message(message)

    # -- handling -------------------------------------------------------------------------------

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        token = REQUEST_ID.set(msg_id)
        params_token = REQUEST_PARAMS.set(params)
        try:
            super()._handle_request(msg_id, method_name, params)
        finally:
            REQUEST_ID.reset(token)
            REQUEST_PARAMS.reset(params_token)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        super()._handle_notification(method_name, params)
        # Only requests' futures need to stay until they are answered.
        done = [key for key, future in self._request_futures.items() if future.done()]
        for key in done:
            self._request_futures.pop(key, None)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        event = self._server.command_cancels.get(msg_id)
        if event is not None:
            event.set()
        super()._handle_cancel_notification(msg_id)

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, CLIENT_ERRORS):
            self._request_futures.pop(msg_id, None)
            log.info("request %s refused: %s", msg_id, exc)
            if isinstance(exc, BadRequest):
                exc = JsonRpcInvalidParams(str(exc))
            self._send_response(msg_id, error=exc.to_response_error())
            return
        if exc is not None and not isinstance(exc, JsonRpcException):
            # A bug of ours: pygls logs the traceback and answers -32603; the user hears once.
            self._server.tell_once(INTERNAL)
        super()._send_handler_result(future, msg_id=msg_id)

    # Documents live in the completion service: pygls's workspace copies are never made.
    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Any:
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Any:
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)

    def _user_handler(self, method: str, params: Any) -> Any:
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None


def plain(value: Any) -> Any:
    """Params of a method pygls has no type for arrive as namedtuples: back to dicts/lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


class Server(LanguageServer):
    """A pygls server around one CompletionService; handlers are registered by lsp_server.protocol.server."""

    def __init__(self, service: CompletionService) -> None:
        super().__init__("fastcomplete", __version__, protocol_cls=Protocol, max_workers=4)
        self.service = service
        service.notices.connect(self.show, self.send_status)
        self.workspace_root: Path | None = None  # from initialize: the folder to index
        self.client_name = "an LSP client"  # from initialize: `fastcomplete doctor` names it
        self.command_cancels: dict[Any, threading.Event] = {}
        self.exporter: Any = None  # a PrometheusExporter when --metrics-port is given
        self._connected = False

    # -- messages and progress ------------------------------------------------------------------

    def show(self, message: str, level: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=LEVELS[level], message=message))

    def send_status(self, state: str, message: str) -> None:
        """The server's state for the client's status bar (docs/language-server.md, `fastcomplete/status`)."""
        fast = self.service.settings.fastMode
        params = {"state": state, "message": message, "fastMode": fast}
        self.protocol.notify(STATUS_NOTIFICATION, params)

    def tell_once(self, message: str) -> None:
        self.service.notices.tell_once(message)

    def supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

    async def progress(self, kind: str, title: str) -> Callable[[str, int | None], None] | None:
        """A reporter for server-initiated work-done progress, or None when the client has none."""
        if not self.supports_progress():
            return None
        token = f"fastcomplete/{kind}"
        try:
            await self.work_done_progress.create_async(token)
        except Exception:  # a client that refuses progress still gets everything else
            return None
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title))

        def report(message: str, percentage: int | None) -> None:
            if percentage is None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
                self.work_done_progress.tokens.pop(token, None)
            else:
                self.work_done_progress.report(
                    token, types.WorkDoneProgressReport(message=message, percentage=percentage)
                )

        return report

    @contextlib.asynccontextmanager
    async def streamed(
        self, kind: str, title: str
    ) -> AsyncIterator[tuple[Callable[[str], None], threading.Event]]:
        """For an executeCommand handler: (on_text, cancel). The text so far streams as `$/progress`
        reports (into the client's `workDoneToken` when it gave one); `$/cancelRequest` or a
        cancelled progress sets `cancel`, which the decode loop checks between tokens."""
        msg_id = REQUEST_ID.get()
        cancel = threading.Event()
        self.command_cancels[msg_id] = cancel
        client_token = getattr(REQUEST_PARAMS.get(), "work_done_token", None)
        token = client_token or f"fastcomplete/{kind}/{msg_id}"
        progress = client_token is not None or self.supports_progress()
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

        def on_text(text: str) -> None:  # called on a model thread
            if progress:
                loop.call_soon_threadsafe(
                    self.work_done_progress.report,
                    token,
                    types.WorkDoneProgressReport(message=text),
                )

        try:
            yield on_text, cancel
        finally:
            self.command_cancels.pop(msg_id, None)
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd())
                self.work_done_progress.tokens.pop(token, None)

    # -- stdio and TCP --------------------------------------------------------------------------
    # pygls's read loops are replaced by lsp_server.protocol.jsonrpc.read_frames, which survives bad
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
            if self._connected:  # its answers would go to the other editor's connection
                log.warning("refused a second TCP connection: one editor per server")
                writer.write(frame(SECOND_CLIENT))
                await writer.drain()
                writer.close()
                return
            self._connected = True
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


LEVELS = {
    "error": types.MessageType.Error,
    "warning": types.MessageType.Warning,
    "info": types.MessageType.Info,
}
SECOND_CLIENT = {
    "jsonrpc": "2.0",
    "method": types.WINDOW_SHOW_MESSAGE,
    "params": {
        "type": int(types.MessageType.Error),
        "message": "fastcomplete: another editor is already connected to this server; "
        "start one server per editor (another port, or stdio)",
    },
}


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere
