"""What the server answers with an error instead of dying: requests that cannot be served."""

from __future__ import annotations

from lsp_server.documents import Documents, Snapshot


class BadRequest(Exception):
    """The client asked for something impossible: it gets this message as an error response."""


def unknown_document(uri: str) -> BadRequest:
    return BadRequest(f"unknown document {uri}: send textDocument/didOpen first")


def snapshot_of(documents: Documents, uri: str) -> Snapshot:
    """The open document's snapshot; BadRequest when it is not open."""
    snap = documents.snapshot(uri)
    if snap is None:
        raise unknown_document(uri)
    return snap
