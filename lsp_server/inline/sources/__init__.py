"""Where an inline answer can come from, one source a module (base: what a source is). The
service puts them in a chain that the policy tries top to bottom (lsp_server.service)."""
