"""Recent edits: hunks kept while the person types, quoted in prompts at other places."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from inference.engine import EngineConfig
from lsp_server.service import CompletionService
from lsp_server.text.documents import Documents
from lsp_server.workspace.recent_edits import Hunk, RecentEdits, hunk_text, shifted

MODELS = "file:///w/pkg/models.py"
USE = "file:///w/pkg/use.py"
MODELS_TEXT = (
    "import dataclasses\n\n\n@dataclasses.dataclass\nclass Config:\n"
    "    name: str\n    retries: int = 3\n\n\ndef load() -> Config:\n    return Config('x')\n"
)


def _insert(docs: Documents, uri: str, version: int, line: int, character: int, text: str) -> None:
    at = types.Position(line=line, character=character)
    docs.change(
        uri, version, [types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)]
    )


def _setup() -> tuple[Documents, RecentEdits]:
    docs = Documents()
    edits = RecentEdits(lambda uri: d.text if (d := docs.get(uri)) else None)
    docs.on_edit.append(edits.edited)
    docs.open(MODELS, MODELS_TEXT, 1, "python")
    docs.open(
        USE, "from pkg.models import Config\n\n\ndef run(c: Config):\n    return c.", 1, "python"
    )
    return docs, edits


def test_a_new_field_typed_key_by_key_is_one_hunk_quoted_with_its_class() -> None:
    docs, edits = _setup()
    _insert(docs, MODELS, 2, 6, 20, "\n")
    for i, key in enumerate("    timeout_s: float = 1.5"):
        _insert(docs, MODELS, 3 + i, 7, i, key)
    # Asked in the other file: the hunk being typed is quoted as it reads now.
    (snippet,) = edits.recent(USE, 4).snippets
    assert snippet.path == "w/pkg/models.py"  # as the prompt names open documents
    assert snippet.text == (
        "class Config:\n    name: str\n    retries: int = 3\n    timeout_s: float = 1.5"
    )
    # Typing in the other file closes it; the prompt there quotes it, and it stays put while
    # the person types on.
    _insert(docs, USE, 2, 4, 13, "t")
    first = edits.recent(USE, 4).snippets
    _insert(docs, USE, 3, 4, 14, "i")
    assert edits.recent(USE, 4).snippets == first == (snippet,)
    assert edits.recent(USE, 4).names == ("timeout_s", "float")  # brought in by the edit (the
    # prompt leaves out the language's own: lsp_server.prompting.names.recent_rests)


def test_the_hunk_at_the_cursor_is_left_out_and_one_far_above_is_quoted() -> None:
    docs, edits = _setup()
    _insert(docs, MODELS, 2, 5, 8, "_ü")  # name -> name_ü (non-ASCII)
    assert edits.recent(MODELS, 6).snippets == ()  # the window shows it
    assert [s.text.splitlines()[-2] for s in edits.recent(MODELS, 200).snippets] == [
        "    name_ü: str"
    ]
    assert edits.recent(USE, 0).snippets[0].text.startswith("class Config:")


def test_lines_added_above_a_closed_hunk_move_it() -> None:
    assert shifted(Hunk("u", 10, 12), 2, 2, 5) == Hunk("u", 13, 15)  # 3 lines added above
    assert shifted(Hunk("u", 10, 12), 20, 20, 25) == Hunk("u", 10, 12)  # below: unchanged
    assert shifted(Hunk("u", 10, 12), 11, 11, 13) == Hunk("u", 10, 14)  # inside: grows
    assert shifted(Hunk("u", 10, 12), 4, 8, 4) == Hunk("u", 6, 8)  # 4 lines removed above


def test_an_edit_elsewhere_in_the_same_file_closes_the_hunk() -> None:
    docs, edits = _setup()
    _insert(docs, MODELS, 2, 9, 9, "strict: bool, ")  # def load(strict: bool, ) -> Config
    _insert(docs, MODELS, 3, 0, 0, "# header\n")  # far above: a new hunk; the old one moves
    quoted = [s.text for s in edits.recent(MODELS, 0).snippets]
    assert quoted == ["def load(strict: bool, ) -> Config:\n    return Config('x')"]


def test_quoted_text_is_bounded_and_blank_hunks_are_dropped() -> None:
    text = "x = 1\n" + "\n" * 5 + "y = 2\n"
    assert hunk_text(text, 2, 4) == ""
    long = "def f():\n" + "".join(f"    v{i} = {i}\n" for i in range(200))
    quoted = hunk_text(long, 1, 150)
    assert len(quoted) <= 600 and quoted.startswith("def f():\n    v0 = 0")


def test_a_client_that_sends_whole_documents_gives_the_span_that_changed() -> None:
    docs, edits = _setup()
    seen: list[tuple[int, int, str]] = []
    docs.on_edit.append(
        lambda uri, before, start, end, inserted: seen.append((start, end, inserted))
    )
    new = MODELS_TEXT.replace("retries: int = 3", "retries: int = 5")
    docs.change(MODELS, 2, [types.TextDocumentContentChangeWholeDocument(text=new)])
    at = MODELS_TEXT.index("3\n\n\ndef")
    assert seen == [(at, at + 1, "5")]
    assert edits.recent(USE, 0).snippets[0].text.endswith("retries: int = 5")
    docs.change(MODELS, 3, [types.TextDocumentContentChangeWholeDocument(text=new)])
    assert len(seen) == 1  # the same text again: no edit


async def test_the_prompt_quotes_the_edit_and_the_setting_turns_it_off(tiny_model: Path) -> None:
    config = EngineConfig(
        fast_dir=tiny_model / "fast", standard_dir=tiny_model / "standard", cache_dir=None
    )
    svc = CompletionService(lambda message, level: None, config)
    await svc.load_models()
    svc.open(MODELS, MODELS_TEXT, 1, "python")
    svc.open(
        USE, "from pkg.models import Config\n\n\ndef run(c: Config):\n    return c.", 1, "python"
    )
    at = types.Position(line=6, character=20)
    svc.change(
        MODELS,
        2,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(at, at), text="\n    timeout_s: float = 1.5"
            )
        ],
    )
    svc.close(MODELS)  # a closed file's edits are still recent (and it lends no snippet)
    ask = [{"uri": USE, "position": {"line": 4, "character": 13}}]
    assert "#     timeout_s: float = 1.5\n" in svc.debug_document(ask)["prompt"]
    svc.apply_settings({"recentEdits": False})
    assert "timeout_s" not in svc.debug_document(ask)["prompt"]
