"""Suggestions the person passes over again and again at one place. A suggestion shown at a
place is passed over when the next request in that document comes from somewhere else without
it being typed or accepted; after `rejectAfterShows` such times it is held back there until the
code around it changes (users of other assistants ask for exactly this). Asking again at the same
place (an editor re-requesting while the person pauses) is not passing it over."""

from __future__ import annotations

import threading
from collections import OrderedDict

from lsp_server.config.tuning import REJECTION_PLACE_CHARS, REJECTION_PLACES

Place = tuple[str, str, str]  # (document, the code just before the anchor, just after it)


def place_of(uri: str, text: str, offset: int) -> Place:
    lo, hi = max(0, offset - REJECTION_PLACE_CHARS), offset + REJECTION_PLACE_CHARS
    return uri, text[lo:offset], text[offset:hi]


class Rejections:
    """Thread-safe: answers are made on model threads, accepts arrive on the event loop."""

    def __init__(self) -> None:
        self._passed: OrderedDict[tuple[Place, str], int] = OrderedDict()
        self._shown: dict[str, tuple[Place, str]] = {}  # per document: the last one shown
        self._lock = threading.Lock()

    def offer(self, place: Place, suggestion: str, limit: int) -> bool:
        """Whether `suggestion` may be shown at `place` (it is then the document's last shown);
        `limit` 0: always."""
        with self._lock:
            if limit and self._passed.get((place, suggestion), 0) >= limit:
                return False
            self._shown[place[0]] = (place, suggestion)
        return True

    def asked(self, place: Place) -> None:
        """A request at `place`, not typing through a suggestion: the document's last shown
        suggestion, when it was elsewhere, was passed over."""
        with self._lock:
            last = self._shown.get(place[0])
            if last is None or last[0] == place:
                return
            del self._shown[place[0]]
            self._passed[last] = self._passed.pop(last, 0) + 1
            while len(self._passed) > REJECTION_PLACES:
                self._passed.popitem(last=False)

    def taken(self, uri: str) -> None:
        """The person is typing the last suggestion shown in `uri`, or accepted it."""
        with self._lock:
            self._shown.pop(uri, None)

    def accepted(self, uri: str) -> None:
        """A suggestion was accepted in `uri`: what was passed over there counts from zero."""
        with self._lock:
            self._shown.pop(uri, None)
            for key in [k for k in self._passed if k[0][0] == uri]:
                del self._passed[key]

    def forget(self, uri: str) -> None:
        self.accepted(uri)  # a closed document's places go too
