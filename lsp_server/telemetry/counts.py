"""The server's own counts: requests and why some got nothing, and what people accepted and kept.
All of it stays on this machine (fastcomplete/stats, the optional Prometheus endpoint)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from lsp_server.config.settings import Settings
from lsp_server.telemetry.retention import Accepted, RetentionTracker
from lsp_server.text.documents import Documents
from lsp_server.text.positions import PositionError, offset_at

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, Any]], None]


class Telemetry:
    def __init__(
        self, documents: Documents, settings: Callable[[], Settings], spawn: Spawn
    ) -> None:
        self.counts: Counter = Counter()
        self.retention = RetentionTracker()
        self._documents = documents
        self._settings = settings
        self._spawn = spawn
        documents.on_edit.append(
            lambda uri, _before, start, end, inserted: self.retention.edited(
                uri, start, end, len(inserted)
            )
        )

    def no_answer(self, reason: str, where: str = "") -> None:
        """Count why a request got no suggestion; every None answer passes here once."""
        self.counts[f"empty.{reason}"] += 1
        if self._settings().debug:
            log.info("no completion %s: %s", where, reason)

    def server_counts(self) -> dict[str, Any]:
        """The counts without the empty reasons, and the empty reasons by name."""
        server = {k: n for k, n in self.counts.items() if not k.startswith("empty.")}
        reasons = {k.split(".", 1)[1]: n for k, n in self.counts.items() if k.startswith("empty.")}
        return {"server": server, "emptyReasons": reasons}

    def accepted(self, args: Sequence[Any]) -> None:
        """A whole suggestion was accepted (its item's command): [{uri, model, chars, line?,
        character?, text?}]; with where and what, its retention is watched too."""
        self.counts["accepted"] += 1
        arg = args[0] if args and isinstance(args[0], dict) else {}
        model = arg.get("model")
        if isinstance(model, str):
            self.counts[f"accepted.{model}"] += 1
        chars = arg.get("chars")
        if isinstance(chars, int) and chars > 0:
            self.counts["accepted_chars"] += chars
        self._watch(arg.get("uri"), arg.get("line"), arg.get("character"), arg.get("text"), "full")

    def partially_accepted(
        self,
        kind: str,
        length: int,
        uri: Any = None,
        line: Any = None,
        character: Any = None,
        text: Any = None,
    ) -> None:
        """Part of a suggestion was accepted (a word or a line), at (line, character) when given;
        counted locally only."""
        kind = kind if kind in ("word", "line") else "other"
        self.counts[f"accepted_partial.{kind}"] += 1
        self.counts["accepted_partial_chars"] += max(0, length)
        self._watch(uri, line, character, text, kind)

    def _watch(self, uri: Any, line: Any, character: Any, text: Any, kind: str) -> None:
        """Start the retention checks for an accepted text, when the client said where it went."""
        if not (isinstance(uri, str) and isinstance(text, str) and text):
            return
        doc = self._documents.get(uri)
        if doc is None or not isinstance(line, int) or not isinstance(character, int):
            return
        try:
            start = offset_at(doc.text, line, character)
        except PositionError:
            return
        entry = self.retention.track(doc.uri, doc.text, start, text, kind)
        self._spawn(self._check_retention(entry, tuple(self._settings().retentionChecksS)))

    async def _check_retention(self, entry: Accepted, checks_s: tuple[int, ...]) -> None:
        waited = 0.0
        try:
            for check in sorted(checks_s):
                await asyncio.sleep(check - waited)
                waited = check
                doc = self._documents.get(entry.uri)
                if doc is None or not self.retention.watching(entry):
                    self.counts[f"retention.{check}s.unmeasured"] += 1
                    continue
                self.counts[f"retention.{check}s.accepted_chars"] += len(entry.text)
                self.counts[f"retention.{check}s.retained_chars"] += self.retention.measure(
                    entry, doc.text
                )
        finally:
            self.retention.forget(entry)

    def acceptance(self) -> dict[str, Any]:
        """Full, partial and retained acceptance, from the counts."""
        retention = {}
        for check in sorted(self._settings().retentionChecksS):
            accepted = self.counts[f"retention.{check}s.accepted_chars"]
            kept = self.counts[f"retention.{check}s.retained_chars"]
            retention[f"{check}s"] = {
                "acceptedChars": accepted,
                "retainedChars": kept,
                "share": round(kept / accepted, 3) if accepted else None,
            }
        return {
            "full": self.counts["accepted"],
            "fullChars": self.counts["accepted_chars"],
            "partialWord": self.counts["accepted_partial.word"],
            "partialLine": self.counts["accepted_partial.line"],
            "partialChars": self.counts["accepted_partial_chars"],
            "retention": retention,
        }
