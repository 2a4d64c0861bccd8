"""What we know per language, in one place: grammars, file extensions, comment markers, fence
names, and the tree-sitter node types the context builder and definitions read."""

from __future__ import annotations

import re

# An identifier worth matching between files (three characters or more: `i`, `x` say nothing).
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")

# LSP languageId -> (module, function returning the tree-sitter grammar)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "javascriptreact": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "typescriptreact": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
}
JS_LANGUAGES = frozenset({"javascript", "javascriptreact", "typescript", "typescriptreact"})
# File extension -> LSP languageId, for callers that have a path and no editor to ask.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".jsx": "javascriptreact",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".go": "go",
    ".rs": "rust",
}
# More extensions of languages with a grammar, which the index reads (definitions and snippets).
INDEXED_EXTENSIONS: dict[str, str] = {
    **EXTENSIONS,
    ".pyi": "python",
    ".cjs": "javascript",
    ".mts": "typescript",
    ".cts": "typescript",
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

# The line comment that names a file at the top of a prompt.
HASH_COMMENT = frozenset({"python", "ruby", "shellscript", "yaml", "toml", "r"})
SLASH_COMMENT = frozenset(
    {
        *JS_LANGUAGES,
        *("go", "rust", "c", "cpp", "java", "kotlin", "swift", "csharp", "php", "scala", "dart"),
    }
)
# Markdown fence names where they differ from the languageId.
FENCE_NAMES = {
    "javascriptreact": "jsx",
    "typescriptreact": "tsx",
    "typescript": "ts",
    "javascript": "js",
}
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


def comment_marker(language_id: str) -> str | None:
    if language_id in HASH_COMMENT:
        return "#"
    return "//" if language_id in SLASH_COMMENT else None


def fence_name(language_id: str) -> str:
    return FENCE_NAMES.get(language_id, language_id)
