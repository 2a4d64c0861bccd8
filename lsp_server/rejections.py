"""Suggestions offered again and again at one place and never taken. After `rejectAfterShows`
showings of the same suggestion at the same place with no accept in between, it is held back
there until the code around it changes (users of other assistants ask for exactly this)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from inference.tuning import REJECTION_PLACE_CHARS, REJECTION_PLACES

Place = tuple[str, str, str]  # (document, the code just before the anchor, just after it)


def place_of(uri: str, text: str, offset: int) -> Place:
    lo, hi = max(0, offset - REJECTION_PLACE_CHARS), offset + REJECTION_PLACE_CHARS
    return uri, text[lo:offset], text[offset:hi]


class Rejections:
    """Thread-safe: answers are made on model threads, accepts arrive on the event loop."""

    def __init__(self) -> None:
        self._shows: OrderedDict[tuple[Place, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def offer(self, place: Place, suggestion: str, limit: int) -> bool:
        """Whether `suggestion` may be shown at `place` (and count the showing when it may);
        `limit` 0: always."""
        key = (place, suggestion)
        with self._lock:
            shown = self._shows.pop(key, 0)
            if limit and shown >= limit:
                self._shows[key] = shown
                return False
            self._shows[key] = shown + 1
            while len(self._shows) > REJECTION_PLACES:
                self._shows.popitem(last=False)
        return True

    def accepted(self, uri: str) -> None:
        """A suggestion was taken in `uri`: what was offered there starts counting again."""
        with self._lock:
            for key in [k for k in self._shows if k[0][0] == uri]:
                del self._shows[key]

    forget = accepted  # a closed document's places go too
