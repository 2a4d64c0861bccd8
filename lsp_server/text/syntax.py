"""tree-sitter parsing: which languages we know, and how many syntax errors a text has."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

from tree_sitter import Language, Node, Parser, Tree

from lsp_server.text.languages import grammar


@dataclass(frozen=True)
class SyntaxIssue:
    line: int  # 0-based
    column: int
    kind: str  # "error" or "missing"


@cache
def language(language_id: str) -> Language | None:
    """The grammar for an LSP languageId, or None for languages parsed as plain text."""
    entry = grammar(language_id)
    if entry is None:
        return None
    module = importlib.import_module(entry[0])
    return Language(getattr(module, entry[1])())


def parser_for(language_id: str) -> Parser | None:
    """A new parser (cheap; parsers must not be shared between threads), or None."""
    lang = language(language_id)
    return None if lang is None else Parser(lang)


def parse(language_id: str, text: str) -> Tree | None:
    parser = parser_for(language_id)
    return None if parser is None else parser.parse(text.encode("utf-8"))


def syntax_issues(language_id: str, text: str) -> list[SyntaxIssue] | None:
    """Every ERROR and MISSING node; None when the language has no grammar here."""
    tree = parse(language_id, text)
    return None if tree is None else tree_issues(tree)


def tree_issues(tree: Tree) -> list[SyntaxIssue]:
    issues: list[SyntaxIssue] = []

    def walk(node: Node) -> None:
        if node.is_error or node.is_missing:
            row, col = node.start_point
            issues.append(SyntaxIssue(row, col, "missing" if node.is_missing else "error"))
            if node.is_error:
                return  # one report per broken region
        if node.has_error:
            for child in node.children:
                walk(child)

    walk(tree.root_node)
    return issues
