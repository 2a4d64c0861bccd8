"""Every answer of the LSP end-to-end suite is scanned: no special token of any model's prompt
format (FIM, repository files, chat, end of text) may ever reach a client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.helpers import leaked_tokens

SCANNED = ("text_document_inline_completion_async", "text_document_completion_async")


@pytest.fixture(autouse=True)
def no_special_token_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    leaked: list[str] = []
    for name in SCANNED:
        original = getattr(LanguageClient, name)

        async def scanned(self: Any, *args: Any, _original: Any = original, **kw: Any) -> Any:
            answer = await _original(self, *args, **kw)
            leaked.extend(leaked_tokens(answer))
            return answer

        monkeypatch.setattr(LanguageClient, name, scanned)
    yield
    assert not leaked, f"special tokens reached the client: {leaked}"
