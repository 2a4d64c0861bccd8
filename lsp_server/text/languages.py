"""What we know per language, in one place: one `Language` per LSP languageId (its grammar, file
extensions, comment marker, definitions reader and fence name), then the tree-sitter node types
the context builder and definitions read, which are shared across our grammars."""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass

# An identifier worth matching between files (three characters or more: `i`, `x` say nothing).
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True, slots=True)
class Language:
    id: str  # the LSP languageId
    comment: str | None = None  # the line comment that names the file at the top of a prompt
    # (module, function returning the tree-sitter grammar): imported on first parse, so a
    # language nobody opens costs no import
    grammar: tuple[str, str] | None = None
    definitions: str | None = (
        None  # which reader of lsp_server.workspace.definitions walks its tree
    )
    extensions: tuple[str, ...] = ()  # files that are this language, for callers with no editor
    indexed_extensions: tuple[str, ...] = ()  # more that only the index reads as this language
    fence: str | None = None  # markdown fence name, where it differs from the id
    # Keywords and built-ins: names that exist in any file of the language (lsp_server.prompting.names)
    names: frozenset[str] = frozenset()


_JS_NAMES = """
    async await break case catch class const constructor continue debugger default delete do
    else export extends false finally for from function if import in instanceof let new null
    of return static super switch this throw true try typeof undefined var void while yield
    interface type enum implements private protected public readonly abstract declare keyof
    namespace never unknown string number boolean any object symbol bigint
    console Object Array Promise JSON Math Number String Boolean Date Error Map Set RegExp
    Symbol parseInt parseFloat setTimeout clearTimeout setInterval clearInterval require module
    exports process Buffer globalThis window document
"""
_GO_NAMES = """
    break case chan const continue default defer else fallthrough for func go goto if import
    interface map package range return select struct switch type var nil true false append cap
    close copy delete len make new panic print println recover string int int64 int32 uint8
    byte rune float64 bool error any
"""
_RUST_NAMES = """
    as async await break const continue crate dyn else enum extern false fn for if impl in let
    loop match mod move mut pub ref return self Self static struct super trait true type unsafe
    use where while Some None Ok Err Box Vec String Option Result println format vec i32 i64 u8
    u32 u64 usize f64 bool str
"""


def _js(
    language_id: str,
    grammar: tuple[str, str],
    fence: str,
    *extensions: str,
    indexed: tuple[str, ...] = (),
) -> Language:
    """JavaScript and TypeScript, each plain and with JSX: `//` comments, one definitions reader."""
    names = frozenset(_JS_NAMES.split())
    return Language(language_id, "//", grammar, "javascript", extensions, indexed, fence, names)


_JS = ("tree_sitter_javascript", "language")
_TS = "tree_sitter_typescript"
# Rows in field order: id, comment, grammar, definitions, extensions, indexed_extensions, fence,
# names.
LANGUAGES: tuple[Language, ...] = (
    Language(
        "python",
        "#",
        ("tree_sitter_python", "language"),
        "python",
        (".py",),
        (".pyi",),
        names=frozenset(keyword.kwlist + keyword.softkwlist + dir(builtins)),
    ),
    _js("javascript", _JS, "js", ".js", ".mjs", indexed=(".cjs",)),
    _js("javascriptreact", _JS, "jsx", ".jsx"),
    _js("typescript", (_TS, "language_typescript"), "ts", ".ts", indexed=(".mts", ".cts")),
    _js("typescriptreact", (_TS, "language_tsx"), "tsx", ".tsx"),
    Language(
        "go",
        "//",
        ("tree_sitter_go", "language"),
        "go",
        (".go",),
        names=frozenset(_GO_NAMES.split()),
    ),
    Language(
        "rust",
        "//",
        ("tree_sitter_rust", "language"),
        "rust",
        (".rs",),
        names=frozenset(_RUST_NAMES.split()),
    ),
    # No grammar here: a comment marker only (their files reach the index as TEXT_SOURCES).
    *(Language(name, "#") for name in ("ruby", "shellscript", "yaml", "toml", "r")),
    *(
        Language(name, "//")
        for name in ("c", "cpp", "java", "kotlin", "swift", "csharp", "php", "scala", "dart")
    ),
)
_BY_ID = {lang.id: lang for lang in LANGUAGES}

# File extension -> LSP languageId, for callers that have a path and no editor to ask.
EXTENSIONS: dict[str, str] = {ext: lang.id for lang in LANGUAGES for ext in lang.extensions}
# The same and more extensions of languages with a grammar, which the index parses.
INDEXED_EXTENSIONS: dict[str, str] = {
    **EXTENSIONS,
    **{ext: lang.id for lang in LANGUAGES for ext in lang.indexed_extensions},
}
# Source files of languages without a grammar here: they lend the index snippets only.
TEXT_SOURCES = frozenset(
    {
        *(".java", ".kt", ".kts", ".scala", ".groovy", ".cs", ".fs", ".swift", ".dart", ".m"),
        *(".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".mm", ".zig", ".nim"),
        *(".rb", ".php", ".lua", ".pl", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj"),
        *(".sh", ".bash", ".zsh", ".ps1", ".sql", ".vue", ".svelte"),
    }
)
SOURCE_EXTENSIONS = frozenset(INDEXED_EXTENSIONS) | TEXT_SOURCES


def language_names(language_id: str) -> frozenset[str]:
    """The language's keywords and built-ins (none for a language not in the table)."""
    lang = _BY_ID.get(language_id)
    return frozenset() if lang is None else lang.names


def grammar(language_id: str) -> tuple[str, str] | None:
    lang = _BY_ID.get(language_id)
    return None if lang is None else lang.grammar


def definitions_reader(language_id: str) -> str | None:
    lang = _BY_ID.get(language_id)
    return None if lang is None else lang.definitions


def comment_marker(language_id: str) -> str | None:
    lang = _BY_ID.get(language_id)
    return None if lang is None else lang.comment


def fence_name(language_id: str) -> str:
    lang = _BY_ID.get(language_id)
    return language_id if lang is None or lang.fence is None else lang.fence


# A name defined in the document itself needs no definition from elsewhere.
DEFINED_HERE = (
    r"(?:def|class|function|interface|type|struct|enum|trait|fn|func|const|let|var)\s+{}\b"
)

# tree-sitter node types, across our grammars: imports, definitions, strings and comments.
IMPORT_NODES = frozenset(
    {
        "import_statement",
        "import_from_statement",
        "future_import_statement",
        "import_declaration",
        "use_declaration",
        "extern_crate_declaration",
    }
)
DEFINITION_NODES = frozenset(
    {
        "function_definition",
        "class_definition",
        "decorated_definition",
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "method_definition",
        "method_declaration",
        "interface_declaration",
        "function_item",
        "impl_item",
        "trait_item",
        "mod_item",
        "struct_item",
        "enum_item",
        "type_declaration",
    }
)
STRINGLIKE = ("string", "comment", "template_string", "raw_string_literal", "interpreted_string")
COMMENT_NODES = frozenset({"comment", "line_comment", "block_comment"})
