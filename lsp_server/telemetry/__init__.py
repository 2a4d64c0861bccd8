"""The server's own counts and why a request got nothing, what people accepted and kept
(retention), structured logs and the optional Prometheus endpoint. All of it stays on this
machine. It may import lsp_server.text, lsp_server.config, lsp_server.errors and inference."""
