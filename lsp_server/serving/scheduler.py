"""Who runs when: newest request per document wins, and completions pre-empt chat generations."""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(eq=False)
class Ticket:
    uri: str
    seq: int
    cancel: threading.Event = field(default_factory=threading.Event)


class LatestWins:
    """Per document, only the newest request may finish; older ones are cancelled when it starts.

    Used from the event loop thread only; the cancel events are what worker threads see.
    """

    def __init__(self) -> None:
        self._latest: dict[str, Ticket] = {}
        self._seq = itertools.count(1)

    def begin(self, uri: str) -> Ticket:
        previous = self._latest.get(uri)
        if previous is not None:
            previous.cancel.set()
        ticket = Ticket(uri, next(self._seq))
        self._latest[uri] = ticket
        return ticket

    def is_current(self, ticket: Ticket) -> bool:
        return self._latest.get(ticket.uri) is ticket

    def finish(self, ticket: Ticket) -> None:
        if self.is_current(ticket):
            del self._latest[ticket.uri]

    def cancel(self, uri: str) -> None:
        ticket = self._latest.pop(uri, None)
        if ticket is not None:
            ticket.cancel.set()


class Gate:
    """Background generations (explain, refactor) wait between tokens while a completion runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._foreground = 0

    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        with self._cond:
            self._foreground += 1
        try:
            yield
        finally:
            with self._cond:
                self._foreground -= 1
                self._cond.notify_all()

    def pauser(self, cancel: threading.Event):
        """A pause hook for a background generation: returns once no completion is running."""

        def pause() -> None:
            with self._cond:
                while self._foreground and not cancel.is_set():
                    self._cond.wait(timeout=0.05)

        return pause

    @property
    def busy(self) -> bool:
        return self._foreground > 0
