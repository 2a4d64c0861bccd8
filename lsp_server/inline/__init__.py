"""The inline-completion policy: a chain of answer sources tried top to bottom (what is
being typed through, the prefetched next suggestion, the model on the short or the whole prompt)
and one place that applies rejections, the show gate, memory and telemetry to whatever answered;
the work done while nobody waits (background prefill, prefetch). It may import
lsp_server.completion and below, never lsp_server.chat."""
