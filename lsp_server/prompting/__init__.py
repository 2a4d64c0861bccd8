"""What the model is shown: the prompt built from the file with tree-sitter within a token
budget (context), and the names that exist at the cursor (names). It may import
lsp_server.workspace and below, and inference."""
