"""Everything that runs a model. Knows nothing of LSP: token ids in, token ids out."""
