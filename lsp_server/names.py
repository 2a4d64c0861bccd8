"""The names that exist where the cursor ends an identifier: the document's own, those of the
snippets in the prompt, the repository's definitions (the index) and the language's keywords and
built-ins. What each still needs after the typed identifier goes to the decode loop
(GenerationConfig.name_rests, inference/names.py), which keeps the model's first tokens on them.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from inference.tuning import NAMES_MAX_CANDIDATES, NAMES_MIN_WORD_CHARS
from lsp_server.snippet import Snippet

if TYPE_CHECKING:
    from lsp_server.index import WorkspaceIndex

NAME = re.compile(r"(?!\d)\w+")
WORD_BEFORE = re.compile(r"(?!\d)\w+$")
RepoNames = Callable[[str], Iterable[str]]  # prefix -> names the repository defines

_JS_NAMES = [
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "constructor",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "let",
    "new",
    "null",
    "of",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "yield",
    "interface",
    "type",
    "enum",
    "implements",
    "private",
    "protected",
    "public",
    "readonly",
    "abstract",
    "declare",
    "keyof",
    "namespace",
    "never",
    "unknown",
    "string",
    "number",
    "boolean",
    "any",
    "object",
    "symbol",
    "bigint",
    "console",
    "Object",
    "Array",
    "Promise",
    "JSON",
    "Math",
    "Number",
    "String",
    "Boolean",
    "Date",
    "Error",
    "Map",
    "Set",
    "RegExp",
    "Symbol",
    "parseInt",
    "parseFloat",
    "setTimeout",
    "clearTimeout",
    "setInterval",
    "clearInterval",
    "require",
    "module",
    "exports",
    "process",
    "Buffer",
    "globalThis",
    "window",
    "document",
]
_LANGUAGE_NAMES: dict[str, frozenset[str]] = {
    "python": frozenset(keyword.kwlist + keyword.softkwlist + dir(builtins)),
    **{
        lang: frozenset(_JS_NAMES)
        for lang in ("javascript", "javascriptreact", "typescript", "typescriptreact")
    },
    "go": frozenset(
        [
            "break",
            "case",
            "chan",
            "const",
            "continue",
            "default",
            "defer",
            "else",
            "fallthrough",
            "for",
            "func",
            "go",
            "goto",
            "if",
            "import",
            "interface",
            "map",
            "package",
            "range",
            "return",
            "select",
            "struct",
            "switch",
            "type",
            "var",
            "nil",
            "true",
            "false",
            "append",
            "cap",
            "close",
            "copy",
            "delete",
            "len",
            "make",
            "new",
            "panic",
            "print",
            "println",
            "recover",
            "string",
            "int",
            "int64",
            "int32",
            "uint8",
            "byte",
            "rune",
            "float64",
            "bool",
            "error",
            "any",
        ]
    ),
    "rust": frozenset(
        [
            "as",
            "async",
            "await",
            "break",
            "const",
            "continue",
            "crate",
            "dyn",
            "else",
            "enum",
            "extern",
            "false",
            "fn",
            "for",
            "if",
            "impl",
            "in",
            "let",
            "loop",
            "match",
            "mod",
            "move",
            "mut",
            "pub",
            "ref",
            "return",
            "self",
            "Self",
            "static",
            "struct",
            "super",
            "trait",
            "true",
            "type",
            "unsafe",
            "use",
            "where",
            "while",
            "Some",
            "None",
            "Ok",
            "Err",
            "Box",
            "Vec",
            "String",
            "Option",
            "Result",
            "println",
            "format",
            "vec",
            "i32",
            "i64",
            "u8",
            "u32",
            "u64",
            "usize",
            "f64",
            "bool",
            "str",
        ]
    ),
}


def word_before(line_prefix: str, line_suffix: str) -> str:
    """The identifier the cursor ends ("" when it is not at the end of one)."""
    if line_suffix[:1].isalnum() or line_suffix[:1] == "_":
        return ""  # inside an identifier: what it becomes is already written
    found = WORD_BEFORE.search(line_prefix)
    return found.group() if found else ""


def name_rests(
    word: str,
    text_around: str,
    language_id: str,
    snippets: Iterable[Snippet] = (),
    repo_names: RepoNames | None = None,
) -> tuple[str, ...]:
    """What each known name starting with `word` still needs ("" for `word` itself), or () when
    none does or too many do. `text_around`: the document without the identifier at the cursor
    (it is not a known name for being typed)."""
    if len(word) < NAMES_MIN_WORD_CHARS:
        return ()
    starts = re.compile(rf"(?<!\w){re.escape(word)}\w*")
    found = set(starts.findall(text_around))
    for snippet in snippets:
        found.update(starts.findall(snippet.text))
    found.update(n for n in language_names(language_id) if n.startswith(word))
    if repo_names is not None:
        found.update(repo_names(word))
    if not found or len(found) > NAMES_MAX_CANDIDATES:
        return ()
    return tuple(sorted(name[len(word) :] for name in found))


def language_names(language_id: str) -> frozenset[str]:
    return _LANGUAGE_NAMES.get(language_id, frozenset())


def index_names(index: WorkspaceIndex, skip_rel: str | None) -> RepoNames:
    """The index's defined names by prefix, leaving out the file being edited (its text is the
    editor's, not the saved copy's); one more than the cap, so that too many shows."""
    skip = (skip_rel,) if skip_rel else ()
    return lambda prefix: index.defined_names(prefix, skip=skip, limit=NAMES_MAX_CANDIDATES + 1)
