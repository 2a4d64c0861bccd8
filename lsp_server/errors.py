"""What the server answers with an error instead of dying: requests that cannot be served."""

from __future__ import annotations


class BadRequest(Exception):
    """The client asked for something impossible: it gets this message as an error response."""


def unknown_document(uri: str) -> BadRequest:
    return BadRequest(f"unknown document {uri}: send textDocument/didOpen first")
