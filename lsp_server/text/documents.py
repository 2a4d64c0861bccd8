"""The open documents: text, version, language, and one tree-sitter tree each, kept current.

Each `didChange` edit is applied to the text exactly as the LSP says (lsp_server.text.edits) and to the
tree with `Tree.edit`, the way editors keep their syntax trees; the next snapshot re-parses
incrementally, reusing every unchanged subtree. A snapshot is immutable: worker threads read it
while the event loop applies later edits (to a copy of the tree, never to a snapshot's).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import unquote

from lsprotocol import types
from tree_sitter import Point, Tree

from lsp_server.config.tuning import RECENT_DOCUMENTS, TREE_MAX_CHARS
from lsp_server.errors import BadRequest
from lsp_server.text.edits import change_span
from lsp_server.text.positions import LINE_BREAK, offset_at, utf16_len
from lsp_server.text.syntax import parser_for

AROUND_BEFORE, AROUND_AFTER = 512 << 10, 64 << 10


@dataclass(frozen=True)
class Snapshot:
    """A document as it was when a request arrived."""

    uri: str
    text: str
    version: int
    language_id: str
    tree: Tree | None  # `text` parsed; None without a grammar or for very large documents
    others: tuple[tuple[str, str], ...] = ()  # (uri, text) of recently used other documents


@dataclass(eq=False)
class Document:
    uri: str
    text: str
    version: int
    language_id: str
    tree: Tree | None = None  # parsed from `text` when `edited` is None
    edited: Tree | None = None  # `tree` with the edits since, awaiting an incremental parse
    stale: bool = True  # the text changed in a way the tree cannot follow: parse from scratch
    parses: int = 0  # how many parses this document has had (for tests, bench)
    edit_end: int | None = None  # where the last edit's text ends (where the person types)
    changed_at: float = field(default_factory=time.monotonic)  # opened or last edited

    def still_for_s(self) -> float:
        """How long the text has not changed: a person at rest, or typing."""
        return time.monotonic() - self.changed_at


def _point(text: str, offset: int) -> tuple[int, Point]:
    """Byte offset and tree-sitter point (row, byte column) of a character offset."""
    line_begin = text.rfind("\n", 0, offset) + 1
    column = len(text[line_begin:offset].encode("utf-8"))
    byte = len(text[:line_begin].encode("utf-8")) + column
    return byte, Point(text.count("\n", 0, line_begin), column)


def changed_span(old: str, new: str) -> tuple[int, int]:
    """The [start, end) of `old` that `new` replaces (a client that sends whole documents says
    no more); (len(old), len(old)) when nothing changed."""
    n = min(len(old), len(new))
    head = next((i for i in range(n) if old[i] != new[i]), n)
    tail = 0
    while tail < n - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, len(old) - tail


def edit_tree(tree: Tree, old: str, start: int, end: int, inserted: str) -> None:
    """Tell `tree` that old[start:end] was replaced by `inserted`."""
    start_byte, start_point = _point(old, start)
    old_end_byte, old_end_point = (start_byte, start_point) if end == start else _point(old, end)
    added = inserted.encode("utf-8")
    new_end_byte = start_byte + len(added)
    lines = inserted.count("\n")
    if lines:
        last_line = len(inserted[inserted.rfind("\n") + 1 :].encode("utf-8"))
        new_end_point = Point(start_point.row + lines, last_line)
    else:
        new_end_point = Point(start_point.row, start_point.column + len(added))
    tree.edit(
        start_byte=start_byte,
        old_end_byte=old_end_byte,
        new_end_byte=new_end_byte,
        start_point=start_point,
        old_end_point=old_end_point,
        new_end_point=new_end_point,
    )


class Documents:
    """Open documents by URI (percent-decoded: editors differ in what they escape)."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()  # most recently used last
        # Told of each edit as (uri, text before it, start, end, inserted text); a whole
        # document sent again is told as the span that differs.
        self.on_edit: list[Callable[[str, str, int, int, str], None]] = []

    @staticmethod
    def key(uri: str) -> str:
        return unquote(uri)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(self.key(uri))

    def open(self, uri: str, text: str, version: int, language_id: str) -> Document:
        doc = Document(self.key(uri), text, version, language_id)
        self._docs[doc.uri] = doc
        self.touch(doc.uri)
        return doc

    def close(self, uri: str) -> None:
        self._docs.pop(self.key(uri), None)
        self._recent.pop(self.key(uri), None)

    def change(
        self, uri: str, version: int, changes: Sequence[types.TextDocumentContentChangeEvent]
    ) -> Document | None:
        """Apply edits in order; None for a document that is not open."""
        doc = self.get(uri)
        if doc is None:
            return None
        for change in changes:
            start, end = change_span(doc.text, change)
            new = "".join((doc.text[:start], change.text, doc.text[end:]))
            whole = not isinstance(change, types.TextDocumentContentChangePartial)
            inserted = change.text
            if whole:
                start, end = changed_span(doc.text, new)
                inserted = new[start : len(new) - (len(doc.text) - end)]
            changed = start != end or bool(inserted)
            if changed:
                for listener in self.on_edit:
                    listener(doc.uri, doc.text, start, end, inserted)
            doc.edit_end = start + len(inserted)
            if whole:
                doc.stale = True
                doc.edit_end = doc.edit_end if changed else None
            elif not doc.stale and doc.tree is not None and len(new) <= TREE_MAX_CHARS:
                if doc.edited is None:
                    doc.edited = doc.tree.copy()  # snapshots keep the tree they were given
                edit_tree(doc.edited, doc.text, start, end, change.text)
            doc.text = new
            if changed:
                doc.changed_at = time.monotonic()
        doc.version = version
        self.touch(doc.uri)
        return doc

    def latest(self) -> str | None:
        """The open document the person touched last (opened, focused or asked in)."""
        return next((u for u in reversed(self._recent) if u in self._docs), None)

    def touch(self, uri: str) -> None:
        self._recent[uri] = None
        self._recent.move_to_end(uri)
        while len(self._recent) > RECENT_DOCUMENTS:
            self._recent.popitem(last=False)

    def parse(self, doc: Document) -> Tree | None:
        """The document's current tree: an incremental parse after edits, a full one after a
        whole-document change, nothing when the tree is current."""
        if len(doc.text) > TREE_MAX_CHARS:
            doc.tree = doc.edited = None
            doc.stale = True
            return None
        if not doc.stale and doc.edited is None:
            return doc.tree
        parser = parser_for(doc.language_id)
        if parser is None:
            return None
        source = doc.text.encode("utf-8")
        old = None if doc.stale else doc.edited
        doc.tree = parser.parse(source) if old is None else parser.parse(source, old)
        doc.edited, doc.stale = None, False
        doc.parses += 1
        return doc.tree

    def snapshot(self, uri: str) -> Snapshot | None:
        doc = self.get(uri)
        if doc is None:
            return None
        others = tuple(
            (u, d.text) for u in self._recent if u != doc.uri and (d := self._docs.get(u))
        )
        return Snapshot(doc.uri, doc.text, doc.version, doc.language_id, self.parse(doc), others)


def insert_parsed(
    text: str,
    tree: Tree | None,
    offset: int,
    inserted: str,
    language_id: str,
    end: int | None = None,
) -> tuple[str, Tree | None]:
    """`text` with `inserted` at `offset` (in place of [offset, end) when `end` is given), and its
    tree: `tree` edited and parsed incrementally (parsed whole when no tree is given; None
    without a grammar)."""
    end = offset if end is None else end
    after = text[:offset] + inserted + text[end:]
    parser = parser_for(language_id)
    if parser is None:
        return after, None
    if tree is None:
        return after, parser.parse(after.encode("utf-8"))
    edited = tree.copy()
    edit_tree(edited, text, offset, end, inserted)
    return after, parser.parse(after.encode("utf-8"), edited)


def with_insertion(snap: Snapshot, offset: int, inserted: str, end: int | None = None) -> Snapshot:
    """The snapshot as it would be with `inserted` typed at `offset` (over [offset, end) when
    `end` is given), for work ahead of the user: the suggestion after an accepted one, or after
    the item selected in the editor's suggest widget."""
    end = offset if end is None else end
    if snap.tree is None:  # no grammar, or too large to keep a tree for
        return replace(snap, text=snap.text[:offset] + inserted + snap.text[end:])
    text, tree = insert_parsed(snap.text, snap.tree, offset, inserted, snap.language_id, end)
    return replace(snap, text=text, tree=tree)


def around_cursor(text: str, line: int, character: int) -> tuple[str, int, int]:
    """For very large documents: the text within a few hundred KB of the cursor, and the cursor's
    (line, UTF-16 character) in that excerpt (parsing 10 MB per keystroke would stall)."""
    offset = offset_at(text, line, character)  # PositionError past the end
    start = max(0, offset - AROUND_BEFORE)
    line_start = LINE_BREAK.search(text, start, offset)
    if start and line_start:
        start = line_start.end()  # begin on a whole line when there is one
    before = text[start:offset]
    breaks = list(LINE_BREAK.finditer(before))
    column = before[breaks[-1].end() :] if breaks else before
    return text[start : offset + AROUND_AFTER], len(breaks), utf16_len(column)


def unknown_document(uri: str) -> BadRequest:
    return BadRequest(f"unknown document {uri}: send textDocument/didOpen first")


def snapshot_of(documents: Documents, uri: str) -> Snapshot:
    """The open document's snapshot; BadRequest when it is not open."""
    snap = documents.snapshot(uri)
    if snap is None:
        raise unknown_document(uri)
    return snap
