"""What the user is told (window/showMessage) and the state their status bar shows."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

Notify = Callable[[str, str], None]  # (message, level: "error" | "warning" | "info")
Status = Callable[[str, str], None]  # (state: "loading" | "ready" | "error", message)


class Notices:
    def __init__(self, notify: Notify | None = None, status: Status | None = None) -> None:
        self.notify: Notify = notify or (lambda message, level: None)  # the log has it anyway
        self.on_status = status
        self.state = ("loading", "models not loaded yet")
        self._shown: set[str] = set()

    def connect(self, notify: Notify, status: Status) -> None:
        """Tell the editor from now on (the transport, once it exists)."""
        self.notify, self.on_status = notify, status

    def tell(self, message: str, level: str = "warning") -> None:
        log.log(logging.INFO if level == "info" else logging.WARNING, message)
        self.notify(message, level)

    def tell_once(self, message: str, level: str = "warning") -> None:
        if message not in self._shown:
            self._shown.add(message)
            self.tell(message, level)

    def set_state(self, state: str, message: str) -> None:
        self.state = (state, message)
        log.info("state: %s (%s)", state, message)
        if self.on_status is not None:
            self.on_status(state, message)
