"""pygls's LanguageServerProtocol, with what a server that lives in the editor all day needs:

- every malformed message answered with its JSON-RPC error (see lsp_server.jsonrpc), and
  requests after `shutdown` refused, as the LSP says;
- incremental edits applied as the LSP says (lsp_server.edits), not as pygls's TextDocument does;
- executeCommand handlers cancellable by $/cancelRequest;
- no future kept per notification (pygls keeps them all: ~2 KB per keystroke, for ever);
- requests refused for a client error logged in one line, not with a traceback.
"""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    RPCRequest,
)

from lsp_server import jsonrpc
from lsp_server.edits import apply_change
from lsp_server.jsonrpc import Fault

if TYPE_CHECKING:
    from lsp_server.server import FastcompleteServer

log = logging.getLogger(__name__)

# The JSON-RPC id and params of the request being handled: lets executeCommand handlers be
# cancelled, and stream into a progress token the client chose (`workDoneToken`).
REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id", default=None)
REQUEST_PARAMS: contextvars.ContextVar[Any] = contextvars.ContextVar("request_params", default=None)

CLIENT_ERRORS = (JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound)
UNREADABLE = "fastcomplete: the editor sent a message the server could not read (see its log)"


def describe(exc: Exception) -> str:
    """Why params did not fit their type, in a line: "... @ $.params.position.line"."""
    try:
        reasons = cattrs.transform_error(exc)
    except Exception:
        reasons = [str(exc) or type(exc).__name__]
    return "; ".join(reasons[:3])


class Protocol(LanguageServerProtocol):
    _server: FastcompleteServer

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
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        uri = params.text_document.uri
        doc = self.workspace.text_documents.get(unquote(uri))
        if doc is None:
            log.warning("ignored edits to a document that is not open")
            self._server.tell_once("fastcomplete ignored edits to a document that is not open")
            return
        text = doc.source
        for change in params.content_changes:
            text = apply_change(text, change)
        doc.apply_change(types.TextDocumentContentChangeWholeDocument(text=text))
        doc.version = params.text_document.version
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None
