"""One tree-sitter tree per document, kept current by incremental parses of each edit."""

from __future__ import annotations

import random

from lsprotocol import types

from lsp_server.completion.run import adds_syntax_errors
from lsp_server.text.documents import Documents
from lsp_server.text.positions import position_at
from lsp_server.text.syntax import parse

URI = "file:///w/m%C3%B6dule.py"
SOURCE = (
    "import os\r\n\n\nclass Größe:\n    '''Maße 👋.'''\n\n    def area(self, w, h):\n"
    "        return w * h\n\n\ndef main():\n    print(Größe().area(2, 3))\n"
)
SNIPPETS = ["x", " = ", "(", ")", ":", "\n    ", "'''", "é", "👋", "def f(a):\n", "return ", "#"]


def _edit(text: str, start: int, end: int, new: str) -> types.TextDocumentContentChangePartial:
    rng = types.Range(
        types.Position(*position_at(text, start)), types.Position(*position_at(text, end))
    )
    return types.TextDocumentContentChangePartial(range=rng, text=new)


def test_incremental_trees_match_a_fresh_parse_after_every_edit() -> None:
    rng = random.Random(7)
    docs = Documents()
    docs.open(URI, SOURCE, 1, "python")
    snap = docs.snapshot(URI)
    assert docs.get(URI).parses == 1
    text = SOURCE
    for version in range(2, 202):
        changes = []
        for _ in range(rng.choice((1, 1, 2))):  # sometimes two edits in one didChange
            start = rng.randrange(len(text) + 1)
            end = min(len(text), start + rng.choice((0, 0, 1, 3)))
            new = rng.choice(SNIPPETS) if rng.random() < 0.8 else ""
            changes.append(_edit(text, start, end, new))
            text = text[:start] + new + text[end:]
        before = snap
        docs.change(URI, version, changes)
        snap = docs.snapshot(URI)
        assert snap.text == text and snap.version == version
        assert str(snap.tree.root_node) == str(parse("python", text).root_node)
        # The earlier snapshot's tree was never touched by the later edits.
        assert str(before.tree.root_node) == str(parse("python", before.text).root_node)
    assert docs.get(URI).parses == 201  # one parse per snapshot after edits
    docs.snapshot(URI)
    assert docs.get(URI).parses == 201  # nothing changed: no parse


def test_a_whole_document_change_parses_from_scratch() -> None:
    docs = Documents()
    docs.open(URI, SOURCE, 1, "python")
    docs.snapshot(URI)
    docs.change(URI, 2, [types.TextDocumentContentChangeWholeDocument(text="def f(:\n")])
    snap = docs.snapshot(URI)
    assert str(snap.tree.root_node) == str(parse("python", "def f(:\n").root_node)


def test_no_grammar_no_tree_and_others_for_snippets() -> None:
    docs = Documents()
    docs.open("file:///w/notes.txt", "plain", 1, "plaintext")
    docs.open(URI, SOURCE, 1, "python")
    assert docs.snapshot("file:///w/notes.txt").tree is None
    assert [u for u, _ in docs.snapshot(URI).others] == ["file:///w/notes.txt"]
    assert docs.get("file:///w/m\u00f6dule.py") is docs.get(URI)  # percent-decoded keys


def test_syntax_check_on_the_document_tree_agrees_with_full_parses() -> None:
    docs = Documents()
    docs.open(URI, SOURCE, 1, "python")
    snap = docs.snapshot(URI)
    offset = SOURCE.index("print(") + len("print(")
    for insert, breaks in (("Größe(), ", False), ("def (", True), ("'''", True), ("", False)):
        with_tree = adds_syntax_errors(snap.text, offset, insert, "python", snap.tree)
        assert with_tree == adds_syntax_errors(snap.text, offset, insert, "python") == breaks
