"""The rest of a suggestion the person is typing through: no debounce, no model."""

from __future__ import annotations

from lsp_server.inline.sources.base import Attempt, Offer


class TypedThrough:
    async def attempt(self, attempt: Attempt) -> Offer | None:
        found = attempt.ask.remembered
        if found is None or not found.typed:
            return None
        item = found.item
        return Offer(
            found.origin, found.rest, item.result, attempt.ask.text, item.anchor, found.typed
        )
