"""One completion, from a cursor to the text shown: its plan made once (plan: route, model,
prompt, token ids, generation settings), its run through the engine with post-processing and a
syntax check (run, postprocess), and where and on what the server plans it (planner: the view at
the cursor, the repository's snippets, recent edits). The server, `fastcomplete eval` and
`fastcomplete complete` all go through here. It may import lsp_server.prompting and below."""
