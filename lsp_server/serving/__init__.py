"""The models as the server runs them and who runs when: the engine made from the settings
and loaded in the background (model_lifecycle), newest-request-wins and completions before chat
(scheduler), and what the user is told (notices). It may import lsp_server.text,
lsp_server.config, lsp_server.errors and inference."""
