"""Hybrid retrieval over one document's chunks: vector search fused with BM25, optional rerank.

``hybrid_search`` ranks a document's chunks for a query twice, by cosine similarity in the shared
Chroma store and by BM25 over the chunk texts (``bm25s``, tokenised with
``stores.embedders.lexical_tokens`` so Chinese and English both work), and fuses the two
rankings with reciprocal rank fusion. The BM25 index of a document is built once and cached per
process. ``focus_snippet`` cuts a chunk down to the sentences that matter for a query, so prompts
stay small without losing the evidence. The same retrieval across several documents (BM25 summed
from per-document term counts) is :mod:`nodes.collection.index`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from stores.cache import ProcessCache
from stores.documents import find_document, index_identity
from stores.errors import InputError
from stores.ranking import RRF_K, bm25_index, bm25_scores, rrf_scores
from stores.text import count_tokens, lexical_tokens, split_sentences, truncate_tokens
from stores.vectorstore import Hit, VectorStore

Rerank = Literal["none", "sentence"]
_CACHE_SIZE = 64


@dataclass
class LexicalIndex:
    """BM25 over the chunks of one document, in position order."""

    hits: list[Hit]
    bm25: Any | None  # a bm25s.BM25 index (bm25s has no type hints)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query`` (zeros when the query shares no term)."""
        return bm25_scores(self.bm25, lexical_tokens(query), len(self.hits)).astype(np.float32)


_indexes: ProcessCache[tuple[object, ...], LexicalIndex] = ProcessCache("lexical indexes", _CACHE_SIZE)


def index_key(store: VectorStore, doc_id: str, count: int) -> tuple[object, ...]:
    """What a per-process cache of ``doc_id``'s chunks is keyed by: collection, chunk count, chunking."""
    info = find_document(store.namespace, doc_id)
    shape = (index_identity(info),) if info is not None else ()
    return (store.collection_name, doc_id, count, *shape)


def lexical_index(store: VectorStore, doc_id: str) -> LexicalIndex:
    """The BM25 index of ``doc_id``'s chunks (built on first use, then cached per process)."""
    count = store.count(doc_id=doc_id, kind="chunk")

    def build() -> LexicalIndex:
        hits = store.by_doc(doc_id)
        return LexicalIndex(hits=hits, bm25=bm25_index([lexical_tokens(h.text) for h in hits]))

    return _indexes.get_or_build(index_key(store, doc_id, count), build)


def clear_lexical_cache() -> None:
    """Forget every cached BM25 index."""
    _indexes.clear()


def bm25_search(store: VectorStore, doc_id: str, query: str, k: int) -> list[Hit]:
    """Chunks of ``doc_id`` ranked by BM25 for ``query``; chunks sharing no term are left out."""
    index = lexical_index(store, doc_id)
    scores = index.scores(query)
    order = sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-float(scores[i]), i))
    out = []
    for i in order[:k]:
        hit = index.hits[i]
        out.append(Hit(id=hit.id, text=hit.text, metadata=dict(hit.metadata), score=float(scores[i])))
    return out


def rrf_fuse(rankings: Sequence[Sequence[Hit]], weights: Sequence[float] | None = None, k: int = RRF_K) -> list[Hit]:
    """Chunks fused by :func:`rrf_scores`, best first, each with its rank in every ranking (``ranks``)."""
    fused = rrf_scores([[hit.id for hit in ranking] for ranking in rankings], weights, k)
    first: dict[str, Hit] = {}
    ranks: dict[str, list[int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, hit in enumerate(ranking, start=1):
            first.setdefault(hit.id, hit)
            ranks.setdefault(hit.id, [0] * len(rankings))[which] = rank
    ordered = sorted(fused, key=lambda rid: (-fused[rid], first[rid].position, rid))
    out = []
    for rid in ordered:
        hit = first[rid]
        meta = dict(hit.metadata)
        meta["ranks"] = ranks[rid]
        out.append(Hit(id=hit.id, text=hit.text, metadata=meta, score=fused[rid]))
    return out


def _windows(text: str) -> list[str]:
    """Sentences of ``text`` (lines first, so transcripts and lists split too)."""
    out: list[str] = []
    for line in re.split(r"\n+", text):
        out.extend(split_sentences(line.strip()))
    return [s for s in out if s]


def rerank_by_sentence(store: VectorStore, query: str, hits: Sequence[Hit]) -> list[Hit]:
    """Reorder ``hits`` by the best cosine between the query and any one of their sentences."""
    if not hits:
        return []
    qvec = np.asarray(store.embedder.embed_query(query), dtype=np.float32)
    best: list[float] = []
    for hit in hits:
        sentences = _windows(hit.text)[:40] or [hit.text]
        mat = np.asarray(store.embedder.embed_documents(sentences), dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(qvec) or 1.0)
        norms[norms == 0] = 1.0
        best.append(float(np.max(mat @ qvec / norms)))
    order = sorted(range(len(hits)), key=lambda i: (-best[i], i))
    out = []
    for i in order:
        meta = dict(hits[i].metadata)
        meta["rerank_score"] = best[i]
        out.append(Hit(id=hits[i].id, text=hits[i].text, metadata=meta, score=hits[i].score))
    return out


def hybrid_search(
    store: VectorStore,
    doc_id: str,
    query: str,
    k: int = 4,
    *,
    candidates: int | None = None,
    weights: tuple[float, float] = (1.0, 1.0),
    rerank: Rerank = "none",
    rrf_k: int = RRF_K,
) -> list[Hit]:
    """The ``k`` chunks of ``doc_id`` most relevant to ``query``: vector + BM25 fused by RRF.

    ``candidates`` (default ``max(3k, 10)``) are taken from each ranking before fusion;
    ``weights`` weigh the vector and BM25 rankings; ``rerank="sentence"`` reorders the fused
    candidates by their best-matching sentence (embedding cosine). Returned hits carry the fused
    score and ``metadata["ranks"] = [vector rank, bm25 rank]`` (0 = absent from that ranking).
    """
    if not isinstance(query, str) or not query.strip():
        raise InputError("the search query is empty")
    if k <= 0:
        return []
    if rerank not in ("none", "sentence"):
        raise InputError(f"unknown rerank {rerank!r}; use 'none' or 'sentence'")
    pool = candidates or max(3 * k, 10)
    vector = store.search(query, k=pool, doc_id=doc_id, kind="chunk")
    lexical = bm25_search(store, doc_id, query, pool)
    fused = rrf_fuse([vector, lexical], weights=list(weights), k=rrf_k)
    if rerank == "sentence":
        fused = rerank_by_sentence(store, query, fused[:pool])
    return fused[:k]


def focus_snippet(text: str, query: str, max_tokens: int) -> str:
    """The sentences of ``text`` that best match ``query``, in their original order, within ``max_tokens``.

    Sentences are scored by the IDF-weighted query terms they contain (IDF over the sentences of
    this text); a text already within budget is returned whole. Gaps are marked with ``…``.
    """
    if count_tokens(text) <= max_tokens:
        return text.strip()
    sentences = _windows(text)
    if not sentences:
        return truncate_tokens(text, max_tokens)
    query_terms = set(lexical_tokens(query))
    token_sets = [set(lexical_tokens(s)) for s in sentences]
    n = len(sentences)
    df: dict[str, int] = {}
    for tokens in token_sets:
        for t in tokens & query_terms:
            df[t] = df.get(t, 0) + 1
    scores = [sum(math.log(1 + n / (1 + df[t])) for t in tokens & query_terms) for tokens in token_sets]
    order = sorted(range(n), key=lambda i: (-scores[i], i)) if any(scores) else list(range(n))
    chosen: list[int] = []
    used = 0
    for i in order:
        cost = count_tokens(sentences[i])
        if used + cost > max_tokens:
            if not chosen:
                return truncate_tokens(sentences[i], max_tokens)
            continue
        chosen.append(i)
        used += cost
    chosen.sort()
    parts: list[str] = []
    for j, i in enumerate(chosen):
        gap = i > 0 if j == 0 else i != chosen[j - 1] + 1
        if gap:
            parts.append("…")
        parts.append(sentences[i])
    if chosen and chosen[-1] < n - 1:
        parts.append("…")
    return " ".join(parts)
