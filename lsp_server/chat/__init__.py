"""Explain and refactor: a selection sent to the standard model (or a remote), streamed, with
the prompts for them. It may import lsp_server.completion and below, never lsp_server.inline."""
