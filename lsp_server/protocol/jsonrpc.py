"""The LSP base protocol, strictly: frames read the way vscode-jsonrpc writes them, and every
malformed message answered with the error JSON-RPC 2.0 names for it.

pygls's own reader matches only "Content-Length: N" byte for byte (a lowercase header loses the
stream for good) and parses while structuring, so a parse error, a message that is not a request
or params of the wrong shape get no response at all: the client waits for ever. Here parsing and
checking come first, as plain functions, and only a well-formed message reaches pygls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Header names are case-insensitive (the base protocol follows HTTP). Searched anywhere in the
# line so that a frame glued to the tail of a mis-sized body is still found.
CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)", re.IGNORECASE)
MAX_BODY_BYTES = 1 << 30  # a larger Content-Length is a broken header, not a message
SURROGATE = re.compile("[\ud800-\udfff]")

MsgId = int | str


@dataclass(frozen=True)
class Fault:
    """A message refused before it reached a handler, and the error response it gets."""

    code: int
    message: str
    msg_id: MsgId | None = None

    def response(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.msg_id,
            "error": {"code": self.code, "message": self.message},
        }


def valid_id(value: Any) -> bool:
    # LSP ids are integers or strings; bool is an int subclass in Python but not in JSON.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(body: bytes) -> dict[str, Any] | Fault:
    """A JSON-RPC 2.0 message as a dict, or the Fault that answers it.

    Lone surrogates (valid JSON escapes, not valid Unicode) become U+FFFD: one UTF-16 unit for
    one, so positions the editor sends afterwards still line up.
    """
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Fault(PARSE_ERROR, f"Parse error: the message is not valid UTF-8 ({exc.reason})")
    except json.JSONDecodeError as exc:
        return Fault(PARSE_ERROR, f"Parse error: {exc}")
    except RecursionError:
        return Fault(PARSE_ERROR, "Parse error: the message is nested too deeply")
    if not isinstance(data, dict):
        kind = "a batch" if isinstance(data, list) else f"a JSON {type(data).__name__}"
        return Fault(INVALID_REQUEST, f"Invalid Request: {kind}, not a message object")
    msg_id = data.get("id")
    reply_to = msg_id if valid_id(msg_id) else None
    if data.get("jsonrpc") != "2.0":
        return Fault(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', reply_to)
    if "id" in data and not valid_id(msg_id):
        return Fault(INVALID_REQUEST, "Invalid Request: an id must be an integer or a string")
    if "method" in data:
        if not isinstance(data["method"], str):
            return Fault(INVALID_REQUEST, "Invalid Request: the method must be a string", reply_to)
    elif "id" not in data or not ("result" in data or "error" in data):
        reason = "neither a request, a notification nor a response"
        return Fault(INVALID_REQUEST, f"Invalid Request: {reason}", reply_to)
    if b"\\u" in body and re.search(rb"\\u[dD][89a-fA-F]", body):
        data = _replace_surrogates(data)
    return data


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


async def read_frames(
    readline: Callable[[], Awaitable[bytes]], read: Callable[[int], Awaitable[bytes]]
) -> AsyncIterator[bytes | Fault]:
    """Message bodies from a byte stream, until it ends.

    Headers end at an empty line; only Content-Length matters. Lines that are not headers (the
    tail of a body whose Content-Length was too short) are skipped, so the stream recovers at the
    next well-formed frame instead of staying out of step.
    """
    length: int | None = None
    while True:
        try:
            line = await readline()
        except ValueError:  # asyncio's StreamReader: a line over its limit, already consumed
            log.warning("skipped an over-long header line")
            continue
        if not line:
            return
        if line.strip():
            if found := CONTENT_LENGTH.search(line):
                length = int(found.group(1))
            elif b":" not in line:
                log.warning("skipped %d bytes that are not a header", len(line))
            continue
        if length is None:
            continue  # an empty line outside a header block
        if length > MAX_BODY_BYTES:
            yield Fault(PARSE_ERROR, f"Parse error: Content-Length {length} is too large")
            length = None
            continue
        try:
            body = await read(length) if length else b""
        except asyncio.IncompleteReadError:
            return
        if len(body) < length:
            return  # the stream ended inside a body
        length = None
        yield body
