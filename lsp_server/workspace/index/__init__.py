"""The workspace index: which files (files), their windows in an embedded search engine on disk
(store: tantivy, BM25), the index itself (workspace: search and definitions) and the background
worker that builds and updates it (worker)."""

from lsp_server.workspace.index.files import IndexLimits
from lsp_server.workspace.index.worker import Indexer
from lsp_server.workspace.index.workspace import IndexReport, WorkspaceIndex

__all__ = ["IndexLimits", "IndexReport", "Indexer", "WorkspaceIndex"]
