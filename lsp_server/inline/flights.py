"""The model's answers still being written, one per document, so that the next key's request
can take one over instead of starting again.

A person typing at ~130 ms a key outpaces a suggestion that takes 300-600 ms to write on two
cores: each key used to cancel the answer in flight and start another that the next key
cancelled in turn. When what was typed since agrees with what the model is writing at that
place, the newer request waits for that answer and shows its rest (as Continue keeps reading its
running stream); when it disagrees, the run is cancelled as before. An editor cancels the
older request as it sends the newer one, so a run whose request was cancelled is only stopped
after a short grace (`T_ADOPT_GRACE_MS`), unless a newer request took it over by then.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from lsp_server.config.tuning import T_ADOPT_GRACE_MS


@dataclass(eq=False)
class Flight:
    """One model run for an inline request: the document it was asked on, around the cursor,
    and what the model has written so far (raw, before post-processing)."""

    uri: str
    before: str  # the document before the cursor
    after: str  # the document after the cursor
    cancel: threading.Event
    task: asyncio.Future[Any] | None = None  # the run: (plan, completion) once done
    written: str = ""  # set from the model thread, read on the event loop
    adopted: bool = False  # a newer request waits for it
    abandoned: bool = field(default=False, repr=False)

    def wrote(self, text: str) -> None:
        self.written = text

    def typed_since(self, text: str, offset: int) -> str | None:
        """What was typed at the cursor since the run was asked for, when `text` is its
        document with only that typed there and the cursor after it; else None."""
        typed = offset - len(self.before)
        if typed <= 0 or len(text) != len(self.before) + typed + len(self.after):
            return None
        if not (text.startswith(self.before) and text.endswith(self.after)):
            return None
        return text[len(self.before) : offset]

    def agrees(self, typed: str) -> bool:
        """Whether the model may still be writing what was typed: it wrote it already, or has
        not written that far yet and what it wrote starts it."""
        written = self.written
        return written.startswith(typed) or typed.startswith(written)


class Flights:
    """The newest run per document (the event loop thread only)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, Flight] = {}

    def started(self, flight: Flight) -> None:
        older = self._by_uri.get(flight.uri)
        if older is not None and older is not flight:
            older.cancel.set()
        self._by_uri[flight.uri] = flight

    def ended(self, flight: Flight) -> None:
        if self._by_uri.get(flight.uri) is flight:
            del self._by_uri[flight.uri]

    def get(self, uri: str) -> Flight | None:
        return self._by_uri.get(uri)

    def cancel(self, uri: str) -> None:
        """A newer request in the document that did not take the run over: it stops."""
        flight = self._by_uri.pop(uri, None)
        if flight is not None:
            flight.cancel.set()

    def abandon(self, flight: Flight) -> None:
        """Its request was cancelled: the run stops after the grace, unless taken over."""
        flight.abandoned = True
        loop = asyncio.get_running_loop()
        loop.call_later(T_ADOPT_GRACE_MS / 1000, _stop_unless_adopted, flight)


def _stop_unless_adopted(flight: Flight) -> None:
    if not flight.adopted:
        flight.cancel.set()
