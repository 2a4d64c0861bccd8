"""The languages table: one `Language` per languageId, and the lookups the other modules use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lsp_server.text.languages import (
    EXTENSIONS,
    INDEXED_EXTENSIONS,
    LANGUAGES,
    SOURCE_EXTENSIONS,
    TEXT_SOURCES,
    comment_marker,
    definitions_reader,
    fence_name,
    grammar,
)


def test_each_language_and_each_extension_appears_once() -> None:
    ids = [lang.id for lang in LANGUAGES]
    assert len(ids) == len(set(ids))
    claimed = [e for lang in LANGUAGES for e in (*lang.extensions, *lang.indexed_extensions)]
    assert len(claimed) == len(set(claimed))
    assert not set(claimed) & TEXT_SOURCES  # a file is parsed or lent as text, not both


def test_a_language_with_a_grammar_has_a_reader_and_files() -> None:
    for lang in LANGUAGES:
        assert (lang.grammar is None) == (lang.definitions is None), lang.id
        assert (lang.grammar is None) == (not lang.extensions), lang.id


def test_extensions_name_languages_for_callers_without_an_editor() -> None:
    assert EXTENSIONS[".tsx"] == "typescriptreact"
    assert ".pyi" not in EXTENSIONS  # stubs are indexed, never evaluated or completed from the CLI
    assert INDEXED_EXTENSIONS[".pyi"] == "python"
    assert {".py", ".pyi", ".java"} <= SOURCE_EXTENSIONS


def test_lookups_answer_for_unknown_languages_too() -> None:
    assert grammar("typescriptreact") == ("tree_sitter_typescript", "language_tsx")
    assert grammar("markdown") is None
    assert definitions_reader("javascriptreact") == "javascript"
    assert definitions_reader("ruby") is None
    assert comment_marker("ruby") == "#"
    assert comment_marker("cpp") == "//"
    assert comment_marker("plaintext") is None
    assert fence_name("typescript") == "ts"
    assert fence_name("python") == "python"
    assert fence_name("plaintext") == "plaintext"


def test_reading_the_table_imports_no_grammar() -> None:
    # Grammars are imported on first parse (lsp_server.text.syntax): a fresh interpreter shows whether
    # the table itself pulled any in.
    code = (
        "import sys, lsp_server.text.languages as l; l.grammar('go'); l.comment_marker('rust');"
        "print(sorted(m for m in sys.modules if m.startswith('tree_sitter')))"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert done.stdout.strip() == "[]"
