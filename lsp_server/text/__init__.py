"""The text of documents: open documents and their tree-sitter trees kept current, LSP
positions (UTF-16) and edits, URIs as paths, and what we know per language. The floor everything
else stands on: it may import lsp_server.config, lsp_server.errors and inference, nothing else of
the server."""
