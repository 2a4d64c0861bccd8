"""lsp_server.protocol.jsonrpc: message checks and framing, without a server."""

from __future__ import annotations

import asyncio
import io

import pytest

from lsp_server.protocol.jsonrpc import (
    INVALID_REQUEST,
    MAX_BODY_BYTES,
    PARSE_ERROR,
    Fault,
    parse,
    read_frames,
)


@pytest.mark.parametrize(
    ("body", "code", "msg_id"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": ', PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}', PARSE_ERROR, None),
        (b"", PARSE_ERROR, None),
        (b"[" * 100_000, PARSE_ERROR, None),
        (b"[]", INVALID_REQUEST, None),
        (b'"text"', INVALID_REQUEST, None),
        (b"null", INVALID_REQUEST, None),
        (b'{"id": 2, "method": "shutdown"}', INVALID_REQUEST, 2),
        (b'{"jsonrpc": "1.0", "id": "a", "method": "shutdown"}', INVALID_REQUEST, "a"),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "shutdown"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": false, "method": "shutdown"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": [3], "method": "shutdown"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 4, "method": ["shutdown"]}', INVALID_REQUEST, 4),
        (b'{"jsonrpc": "2.0", "id": 5}', INVALID_REQUEST, 5),
        (b'{"jsonrpc": "2.0", "result": 1}', INVALID_REQUEST, None),
    ],
)
def test_malformed_messages_get_their_fault(body: bytes, code: int, msg_id: object) -> None:
    fault = parse(body)
    assert isinstance(fault, Fault)
    assert (fault.code, fault.msg_id) == (code, msg_id)
    response = fault.response()
    assert response["jsonrpc"] == "2.0" and "id" in response  # "id": null when unknown
    assert response["error"]["code"] == code


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "shutdown"}',
        b'{"jsonrpc": "2.0", "id": "x", "method": "a/b", "params": {"k": [1, {}]}}',
        b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 7, "result": null}',
        b'{"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "m"}}',
    ],
)
def test_well_formed_messages_pass(body: bytes) -> None:
    assert isinstance(parse(body), dict)


def test_lone_surrogates_become_replacement_characters_of_the_same_utf16_length() -> None:
    body = (
        b'{"jsonrpc": "2.0", "method": "m", "params": {"text": "a\\ud800b\\uDC00c\\ud83d\\udc4b",'
        b' "list": ["\\udfff"], "\\ud800": 1}}'
    )
    message = parse(body)
    assert isinstance(message, dict)
    assert message["params"]["text"] == "a\ufffdb\ufffdc👋"  # a real pair stays one character
    assert message["params"]["list"] == ["\ufffd"]
    assert "\ufffd" in message["params"]
    message["params"]["text"].encode("utf-8")  # encodable now


def frames(data: bytes) -> list[bytes | Fault]:
    stream = io.BytesIO(data)

    async def readline() -> bytes:
        return stream.readline()

    async def read(n: int) -> bytes:
        return stream.read(n)

    async def collect() -> list[bytes | Fault]:
        return [item async for item in read_frames(readline, read)]

    return asyncio.run(collect())


def frame(body: bytes, header: bytes = b"Content-Length") -> bytes:
    return header + b": %d\r\n\r\n" % len(body) + body


def test_frames_follow_vscode_jsonrpc_headers() -> None:
    typed = (
        b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}"
    )
    data = frame(b"{}") + frame(b"[1]", b"content-length") + frame(b"22", b"CONTENT-LENGTH") + typed
    assert frames(data) == [b"{}", b"[1]", b"22", b"{}"]
    assert frames(b"Content-Length:3\r\n\r\nabc") == [b"abc"]
    assert frames(b"Content-Length: 3\n\nabc") == [b"abc"]  # bare "\n" line ends: accepted


def test_frames_recover_from_wrong_lengths_and_junk() -> None:
    good = b'{"a": 1}'
    short = b"Content-Length: 3\r\n\r\n" + good + b"\r\n"  # the body's tail is a junk line
    glued = b"Content-Length: 3\r\n\r\n" + good  # the next header is glued to the tail
    no_length = b"Content-Type: application/json\r\n\r\n{}\r\n"
    assert frames(short + frame(good)) == [b'{"a', good]
    assert frames(glued + frame(good)) == [b'{"a', good]
    assert frames(no_length + frame(good)) == [good]
    assert frames(b"\r\n\r\n" + frame(good)) == [good]
    assert frames(b"Content-Length: 0\r\n\r\n" + frame(good)) == [b"", good]


def test_frames_refuse_absurd_lengths_and_stop_at_the_end_of_the_stream() -> None:
    huge = b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
    items = frames(huge + frame(b"{}"))
    assert isinstance(items[0], Fault) and items[0].code == PARSE_ERROR
    assert items[1:] == [b"{}"]
    assert frames(b"Content-Length: 10\r\n\r\nabc") == []  # the stream ended inside a body
    assert frames(b"") == []
