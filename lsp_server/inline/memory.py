"""What the editor is showing, remembered so that typing through it needs no model run.

A suggestion is remembered with the document text on both sides of where it was anchored. When
a later request finds the document equal to that text with the start of the suggestion typed in
between, the rest of the suggestion is the answer (type-through). The suggestion computed ahead,
as if the shown one were accepted, is remembered the same way, anchored after it (prefetch).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from lsp_server.config.tuning import REMEMBERED_DOCUMENTS, REMEMBERED_PER_DOCUMENT_ITEMS
from lsp_server.inline.answers import Origin


@dataclass(frozen=True)
class Remembered:
    before: str  # the document before the anchor
    after: str  # the document after the anchor
    text: str  # the suggestion
    origin: Origin  # what made it: a model answer shown, or a prefetch
    result: Any  # the EngineResult that produced it (its model is what accepting credits)

    @property
    def anchor(self) -> int:
        return len(self.before)


@dataclass(frozen=True)
class Match:
    item: Remembered
    typed: int  # characters of the suggestion already in the document

    @property
    def rest(self) -> str:
        return self.item.text[self.typed :]

    @property
    def origin(self) -> Origin:
        """What showing the rest again is: typing through it, or asking again where it was."""
        if self.typed:
            return Origin.TYPED_THROUGH
        return Origin.PREFETCHED if self.item.origin is Origin.PREFETCHED else Origin.SHOWN_AGAIN


def typed_through(item: Remembered, text: str, offset: int) -> Match | None:
    """The match when `text` is the remembered document with the suggestion's first
    `offset - anchor` characters typed at the anchor, and the cursor right after them."""
    typed = offset - item.anchor
    if not 0 <= typed < len(item.text):
        return None
    if len(text) != len(item.before) + typed + len(item.after):
        return None
    if text[item.anchor : offset] != item.text[:typed]:
        return None
    if not (text.startswith(item.before) and text.endswith(item.after)):
        return None
    return Match(item, typed)


class SuggestionMemory:
    """Recent suggestions per document (shared by the event loop and model threads)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, list[Remembered]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, uri: str, item: Remembered) -> None:
        """Keep `item`, the newest: the last REMEMBERED_PER_DOCUMENT_ITEMS shown, and the last
        prefetch apart from them (the answers shown while a line is typed through would push
        out the line after it, computed for its end)."""
        with self._lock:
            items = [item] + [
                old
                for old in self._items.pop(uri, [])
                if (old.anchor, old.before, old.text) != (item.anchor, item.before, item.text)
            ]
            shown = [i for i in items if i.origin is not Origin.PREFETCHED]
            ahead = [i for i in items if i.origin is Origin.PREFETCHED]
            kept = {id(i) for i in shown[:REMEMBERED_PER_DOCUMENT_ITEMS] + ahead[:1]}
            self._items[uri] = [i for i in items if id(i) in kept]
            while len(self._items) > REMEMBERED_DOCUMENTS:
                self._items.popitem(last=False)

    def find(self, uri: str, text: str, offset: int) -> Match | None:
        """The newest remembered suggestion the document has typed into, with text left."""
        with self._lock:
            items = list(self._items.get(uri, ()))
        for item in items:
            found = typed_through(item, text, offset)
            if found is not None:
                return found
        return None

    def prefetched(self, uri: str, text: str, offset: int) -> bool:
        """Whether the suggestion for exactly this document and cursor was computed ahead."""
        with self._lock:
            items = list(self._items.get(uri, ()))
        return any(
            item.origin is Origin.PREFETCHED
            and (found := typed_through(item, text, offset)) is not None
            and not found.typed
            for item in items
        )

    def forget(self, uri: str) -> None:
        with self._lock:
            self._items.pop(uri, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
