"""LSP over pygls: the base protocol read strictly (jsonrpc), everything that touches pygls
(transport), and thin handlers that translate requests into calls on lsp_server.service
(server). It may import lsp_server.service and below, never lsp_server.cli."""
