"""The rest of the repository, for a prompt: which files may be read (exclusions), the
workspace index (index/), the definitions a file offers, the snippets other files lend, and the
person's recent edits. It may import lsp_server.text, lsp_server.config, lsp_server.errors and
inference."""
