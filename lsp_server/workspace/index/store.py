"""The index on disk: tantivy (an embedded search engine, BM25) holds one document per window of
~20 lines (its identifiers) and one per file (mtime, size, definitions). Writes land at once and
each commit is atomic: a restart re-reads only the files that changed, and a server killed in
the middle of a write leaves the last commit, which opens.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import tantivy

from lsp_server.config.tuning import INDEX_CANDIDATE_WINDOWS, INDEX_MIN_BM25
from lsp_server.text.languages import IDENT
from lsp_server.workspace.definitions import Definition
from lsp_server.workspace.index.files import IndexLimits

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # the folder's name carries it: another schema is another folder
WRITER_HEAP_BYTES = 32 << 20
WRITER_WAIT_S = 30.0  # for another server's writer (its build) before giving up a write
FILE, WINDOW = "file", "window"


@dataclass(frozen=True)
class FileMeta:
    """What the index keeps of a file besides its windows."""

    rel: str
    mtime_ns: int
    size: int
    definitions: tuple[Definition, ...]


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("kind", tokenizer_name="raw")
    builder.add_text_field("rel", stored=True, tokenizer_name="raw")
    builder.add_unsigned_field("start", stored=True)
    # Identifiers as they are written (no lowercasing, no splitting at "_"), counted for BM25.
    builder.add_text_field("terms", tokenizer_name="whitespace", index_option="freq")
    builder.add_bytes_field("meta", stored=True)
    return builder.build()


def window_terms(text: str, limits: IndexLimits) -> list[tuple[int, str]]:
    """Windows of `window_lines` lines every `window_step` lines, the last reaching the end:
    (first line, its identifiers)."""
    lines = text.split("\n")
    size, step = limits.window_lines, limits.window_step
    count = 1 + math.ceil(max(len(lines) - size, 0) / step)
    return [
        (w * step, " ".join(IDENT.findall("\n".join(lines[w * step : w * step + size]))))
        for w in range(count)
    ]


class WindowStore:
    """Thread-safe: the index thread writes, request threads search. The writer (tantivy allows
    one per folder, across processes: two editors may share a workspace) is held from the first
    write to the next commit only."""

    def __init__(self, folder: Path | None, limits: IndexLimits) -> None:
        self._limits = limits
        self._schema = _schema()
        self._lock = threading.Lock()
        self._index = self._open(folder)
        self._writer: tantivy.IndexWriter | None = None

    def _open(self, folder: Path | None) -> tantivy.Index:
        """The stored index (a damaged one is started again); in memory without a folder."""
        if folder is not None:
            for attempt in range(2):
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    index = tantivy.Index(self._schema, path=str(folder), reuse=True)
                    index.searcher()  # reads the last commit: a damaged one fails here
                    return index
                except (OSError, ValueError) as exc:
                    if attempt:
                        log.warning("cannot store the index in %s (%s): in memory", folder, exc)
                        break
                    log.warning("the stored index in %s is damaged (%s): rebuilt", folder, exc)
                    shutil.rmtree(folder, ignore_errors=True)
        return tantivy.Index(self._schema)

    def _writing(self) -> tantivy.IndexWriter:
        """The writer, waiting while another process holds it (lock held; index thread)."""
        waited = 0.0
        while self._writer is None:
            try:
                self._writer = self._index.writer(WRITER_HEAP_BYTES, 1)
            except ValueError:
                if waited >= WRITER_WAIT_S:
                    raise
                time.sleep(0.05)
                waited += 0.05
        return self._writer

    def stored_files(self) -> dict[str, FileMeta]:
        """Every file of the last commit."""
        searcher = self._index.searcher()
        query = tantivy.Query.term_query(self._schema, "kind", FILE)
        found = {}
        total = searcher.num_docs
        for _, address in searcher.search(query, limit=max(total, 1), count=False).hits:
            meta = _meta(searcher.doc(address))
            if meta is not None:
                found[meta.rel] = meta
        return found

    def put(self, meta: FileMeta, text: str) -> None:
        """(Re)index a file: its windows and what is kept of it."""
        stored = json.dumps(
            [meta.rel, meta.mtime_ns, meta.size, [_definition(d) for d in meta.definitions]]
        ).encode("utf-8")
        documents = [tantivy.Document(kind=FILE, rel=meta.rel, meta=stored)]
        for start, terms in window_terms(text, self._limits):
            documents.append(tantivy.Document(kind=WINDOW, rel=meta.rel, start=start, terms=terms))
        with self._lock:
            writer = self._writing()
            writer.delete_documents_by_term("rel", meta.rel)
            for document in documents:
                writer.add_document(document)

    def delete(self, rel: str) -> None:
        with self._lock:
            self._writing().delete_documents_by_term("rel", rel)

    def commit(self) -> None:
        """Make what was written searchable, and durable."""
        with self._lock:
            if self._writer is None:
                return
            self._writer.commit()
            self._writer = None  # released: another server may write now
        self._index.reload()

    def candidates(self, counts: Counter[str], skip: Iterable[str]) -> list[tuple[str, int]]:
        """The best-scoring windows as (relative path, first line), best first: BM25 over
        identifiers, each query term weighed by how often the query holds it."""
        self.commit()  # files indexed so far are searched, also during a build
        searcher = self._index.searcher()
        total = searcher.num_docs
        should = []
        for word, count in counts.items():
            frequency = searcher.doc_freq("terms", word)
            # A term in more than half the windows tells them apart no better than noise.
            if frequency == 0 or frequency > total / 2:
                continue
            term = tantivy.Query.term_query(self._schema, "terms", word, index_option="freq")
            should.append(
                (tantivy.Occur.Should, tantivy.Query.boost_query(term, 1 + math.log(count)))
            )
        if not should:
            return []
        clauses = list(should)  # (a file's own document has no terms: it never matches)
        for rel in skip:
            term = tantivy.Query.term_query(self._schema, "rel", rel)
            clauses.append((tantivy.Occur.MustNot, term))
        query = tantivy.Query.boolean_query(clauses)
        out = []
        for score, address in searcher.search(query, INDEX_CANDIDATE_WINDOWS, count=False).hits:
            if score < INDEX_MIN_BM25:
                break
            document = searcher.doc(address)
            out.append((document["rel"][0], int(document["start"][0])))
        return out


def _definition(d: Definition) -> list[object]:
    return [d.name, d.kind, d.line, d.signature, d.doc]


def _meta(document: tantivy.Document) -> FileMeta | None:
    """A file's stored entry, or None when it is damaged."""
    try:
        rel, mtime_ns, size, definitions = json.loads(bytes(document["meta"][0]))
        return FileMeta(
            str(rel),
            int(mtime_ns),
            int(size),
            tuple(
                Definition(str(n), sys.intern(str(k)), str(rel), int(line), str(sig), str(doc))
                for n, k, line, sig, doc in definitions
            ),
        )
    except (KeyError, IndexError, TypeError, ValueError):
        return None
