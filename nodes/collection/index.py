"""Retrieval across a collection: the store's vector search over its chunks, fused with BM25 over all of them.

The BM25 is computed from per-document term counts.

A document's :class:`TermCounts` (its chunks' term counts and lengths) are counted once per index
and kept in its cache folder; a collection's BM25 (:func:`collection_bm25`) sums them at query
time, as one index over all the chunks would score them. So a collection that grows by a document
counts that document's terms and nothing else, and the dense side is the shared Chroma store
filtered to the collection's published indexes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nodes.retrieval import rrf_fuse
from stores.cache import ProcessCache
from stores.documents import cache_path, get_document, index_identity, write_atomic
from stores.errors import InputError
from stores.ranking import RRF_K
from stores.text import lexical_tokens
from stores.vectorstore import Hit, VectorStore

BM25_K1, BM25_B = 1.5, 0.75
"""BM25's term-frequency saturation and length normalisation (``bm25s``'s defaults, so a collection
scores its chunks as one document's index would)."""


@dataclass
class TermCounts:
    """One document's chunks as BM25 counts them: each chunk's term counts and length, in position order.

    Kept per document (in memory and in the document's cache folder, keyed by its index identity),
    so a collection's BM25 is computed from the counts of its documents: adding a document to a
    collection counts that document's terms and nothing else.
    """

    record_ids: list[str]
    vocab: dict[str, int]
    counts: Any
    """Sparse chunk x term matrix of counts (CSC: one term's column is a slice)."""
    lengths: np.ndarray

    def column(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The chunks holding ``term`` and its count in each (None when no chunk holds it).

        Read straight from the CSC arrays (a sparse slice per term would cost more than the scoring).
        """
        j = self.vocab.get(term)
        if j is None:
            return None
        start, stop = self.counts.indptr[j], self.counts.indptr[j + 1]
        return self.counts.indices[start:stop], self.counts.data[start:stop]

    def df(self, term: str) -> int:
        """Chunks holding ``term``."""
        j = self.vocab.get(term)
        return 0 if j is None else int(self.counts.indptr[j + 1] - self.counts.indptr[j])


def build_term_counts(hits: Sequence[Hit]) -> TermCounts:
    """Term counts of ``hits`` (one document's chunks, in position order)."""
    from scipy.sparse import csc_matrix

    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    data: list[int] = []
    lengths = []
    for row, hit in enumerate(hits):
        tokens = lexical_tokens(hit.text)
        lengths.append(len(tokens))
        counted: dict[int, int] = {}
        for token in tokens:
            j = vocab.setdefault(token, len(vocab))
            counted[j] = counted.get(j, 0) + 1
        rows.extend([row] * len(counted))
        cols.extend(counted)
        data.extend(counted.values())
    counts = csc_matrix((data, (rows, cols)), shape=(len(hits), len(vocab)), dtype=np.float32)
    return TermCounts([h.id for h in hits], vocab, counts, np.asarray(lengths, dtype=np.float32))


_term_counts: ProcessCache[tuple[str, str, str], TermCounts] = ProcessCache("term counts", 4096)


def term_counts(store: VectorStore, doc_id: str, identity: str | None = None) -> TermCounts:
    """The :class:`TermCounts` of ``doc_id``'s published index: from memory, from its cache file, or counted.

    ``identity``: that index, read from its record when not given.
    """
    from scipy.sparse import csc_matrix

    identity = identity or index_identity(get_document(store.namespace, doc_id))
    key = (store.collection_name, doc_id, identity)

    def load() -> TermCounts:
        path = cache_path(store.namespace, doc_id, f"terms-{store.space}-i{identity}.npz")
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                shape = tuple(int(x) for x in data["shape"])
                counts = csc_matrix((data["data"], data["indices"], data["indptr"]), shape=shape)
                terms = [str(t) for t in data["terms"]]
                records = [str(r) for r in data["records"]]
                return TermCounts(records, {t: i for i, t in enumerate(terms)}, counts, data["lengths"])
        found = build_term_counts(store.by_doc(doc_id))
        buffer = io.BytesIO()
        np.savez(
            buffer,
            records=np.asarray(found.record_ids, dtype=str),
            terms=np.asarray(list(found.vocab), dtype=str),
            data=found.counts.data,
            indices=found.counts.indices,
            indptr=found.counts.indptr,
            shape=np.asarray(found.counts.shape),
            lengths=found.lengths,
        )
        write_atomic(path, buffer.getvalue())
        return found

    return _term_counts.get_or_build(key, load)


def collection_bm25(parts: Sequence[TermCounts], query: str) -> list[np.ndarray]:
    """BM25 scores of every chunk of every document in ``parts`` for ``query``: one array per document.

    The scores are those one index over all of them would give (Lucene's idf, ``bm25s``'s defaults).

    Hand-made rather than ``bm25s``: its index is built over one corpus at once, and a collection's
    must be summed from per-document counts, so that a new document rebuilds nothing of the others.
    """
    terms = list(dict.fromkeys(lexical_tokens(query)))
    total = sum(len(p.lengths) for p in parts)
    out = [np.zeros(len(p.lengths), dtype=np.float64) for p in parts]
    if not terms or not total:
        return out
    avgdl = max(float(sum(float(p.lengths.sum()) for p in parts)) / total, 1e-9)
    for term in terms:
        df = sum(p.df(term) for p in parts)
        if not df:
            continue
        idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
        for part, scores in zip(parts, out, strict=True):
            found = part.column(term)
            if found is None:
                continue
            rows, tf = found
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * part.lengths[rows] / avgdl)
            scores[rows] += idf * tf / norm  # Lucene leaves out the constant (k1 + 1), as bm25s does
    return out


def published_indexes(namespace: str, doc_ids: Sequence[str]) -> list[str]:
    """The index each document publishes (one read of the namespace's records, not one per document).

    InputError for a document that is not ingested.
    """
    from stores.documents import list_documents

    known = {info.doc_id: info for info in list_documents(namespace)}
    missing = [d for d in doc_ids if d not in known]
    if missing:
        raise InputError(f"not ingested in namespace {namespace!r}: {missing[0]!r}")
    return [index_identity(known[d]) for d in doc_ids]


def merge_counts(parts: Sequence[TermCounts]) -> TermCounts:
    """The term counts of several documents as one (their chunks one after the other, one vocabulary).

    So a query scores every chunk with a few array operations; made from the per-document counts, nothing
    recounted.
    """
    from scipy.sparse import csc_matrix

    vocab: dict[str, int] = {}
    rows, cols, data = [], [], []
    offset = 0
    for part in parts:
        mapping = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in part.vocab), dtype=np.int64, count=len(part.vocab)
        )
        coo = part.counts.tocoo()
        rows.append(coo.row.astype(np.int64) + offset)
        cols.append(mapping[coo.col])
        data.append(coo.data)
        offset += len(part.record_ids)
    if not rows:
        return TermCounts([], {}, csc_matrix((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))
    counts = csc_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(offset, len(vocab)),
        dtype=np.float32,
    )
    record_ids = [rid for part in parts for rid in part.record_ids]
    return TermCounts(record_ids, vocab, counts, np.concatenate([part.lengths for part in parts]))


class CollectionIndex:
    """Retrieval over several documents of one store: vector search fused with BM25 (:func:`collection_bm25`).

    The store's vector search is restricted to their published indexes; the BM25 runs over all their chunks.

    ``identities``: the index each document publishes (read from their records when not given); the
    per-document term counts are merged once per collection (:func:`merge_counts`).
    """

    def __init__(self, store: VectorStore, doc_ids: Sequence[str], identities: Sequence[str] | None = None) -> None:
        if not doc_ids:
            raise InputError("no document to search")
        self.store = store
        self.doc_ids = list(doc_ids)
        self.identities = list(identities or published_indexes(store.namespace, self.doc_ids))
        self.parts = [term_counts(store, d, i) for d, i in zip(self.doc_ids, self.identities, strict=True)]
        self._merged: TermCounts | None = None

    @property
    def chunks(self) -> int:
        """Chunks of the collection."""
        return sum(len(p.record_ids) for p in self.parts)

    def where(self) -> dict[str, Any]:
        """The store filter of the collection's chunks: the published index of each of its documents."""
        return {"index": {"$in": self.identities}}

    def dense(self, query: str | Sequence[float], k: int) -> list[Hit]:
        """The ``k`` chunks nearest to ``query`` (text or vector) among the collection's, best first."""
        vector = query_vector(self.store, query) if isinstance(query, str) else query
        return self.store.search(list(vector), k=k, kind="chunk", where=self.where(), matching=self.chunks)

    def lexical(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` chunks (record ids) with the best BM25 score for ``query``, best first; none scoring 0."""
        if self._merged is None:
            self._merged = merge_counts(self.parts)
        merged = self._merged
        flat = collection_bm25([merged], query)[0]
        if not np.any(flat > 0):
            return []
        best = np.argpartition(-flat, min(k, len(flat)) - 1)[:k] if k < len(flat) else np.arange(len(flat))
        order = sorted((int(i) for i in best if flat[i] > 0), key=lambda i: (-float(flat[i]), i))
        return [(merged.record_ids[i], float(flat[i])) for i in order]

    def search(self, query: str, k: int = 4, *, candidates: int | None = None, rrf_k: int = RRF_K) -> list[Hit]:
        """The ``k`` chunks of the collection most relevant to ``query``: vector + BM25 fused by RRF.

        As :func:`hybrid_search` does for one document; hits carry ``metadata["ranks"]``.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("the search query is empty")
        if k <= 0:
            return []
        pool = candidates or max(3 * k, 10)
        vector = self.dense(query, pool)
        lexical = self.lexical(query, pool)
        known = {h.id: h for h in vector}
        missing = [rid for rid, _ in lexical if rid not in known]
        known.update({h.id: h for h in self.store.get(missing)})
        ranked = [Hit(rid, known[rid].text, known[rid].metadata, score) for rid, score in lexical if rid in known]
        return rrf_fuse([vector, ranked], k=rrf_k)[:k]


_queries: ProcessCache[tuple[str, str], np.ndarray] = ProcessCache("collection query vectors", 512)


def query_vector(store: VectorStore, text: str) -> np.ndarray:
    """The embedding of query ``text`` in the store's space (kept per process: a chain asks the same texts again)."""
    return _queries.get_or_build(
        (store.space, text), lambda: np.asarray(store.embedder.embed_query(text), dtype=np.float64)
    )


_collections: ProcessCache[tuple[str, tuple[str, ...], tuple[str, ...]], CollectionIndex] = ProcessCache(
    "collection indexes", 16
)


def collection_index(
    store: VectorStore, doc_ids: Sequence[str], identities: Sequence[str] | None = None
) -> CollectionIndex:
    """The :class:`CollectionIndex` of ``doc_ids``, kept per process under the documents' index identities.

    The identities are given, as a run that read them once passes them, or read from the documents' records.
    """
    found = tuple(identities or published_indexes(store.namespace, doc_ids))
    key = (store.collection_name, tuple(doc_ids), found)
    return _collections.get_or_build(key, lambda: CollectionIndex(store, doc_ids, found))
