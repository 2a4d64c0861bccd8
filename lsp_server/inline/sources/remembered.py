"""A suggestion remembered at exactly this place: shown here before and asked for again, or
computed ahead as if the shown one were accepted (prefetch). No debounce, no model."""

from __future__ import annotations

from lsp_server.inline.sources.base import Attempt, Offer


class RememberedHere:
    async def attempt(self, attempt: Attempt) -> Offer | None:
        found = attempt.ask.remembered
        if found is None or found.typed:
            return None
        item = found.item
        return Offer(found.origin, found.rest, item.result, attempt.ask.text, item.anchor)
