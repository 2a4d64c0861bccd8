"""What a user or the project sets: the `fastcomplete` settings section with each default and
range (settings), the VS Code extension's schema generated from them (vscode_package), the
server's tunables with their units (tuning), and the settings each editor sent last (editors,
for `fastcomplete doctor`). It may import inference and lsp_server.errors only."""
