"""Reading a collection: a shortlist of chunks from every document, read best-first over one tree.

A question over a collection does not read each document: it shortlists the chunks most relevant
to the question across all of them (:class:`~nodes.collection.index.CollectionIndex`: the store's
vector search over the collection's published indexes fused with BM25 summed from per-document term
counts) and reads those as one document would be read. Only the shortlisted chunks are cut into
passages, and one Chow-Liu tree is built over them (exact: a shortlist is small). When a worker
names a missing piece, the chunks most relevant to it join the shortlist (at its end, so the
passages already numbered keep their numbers). So the cost of an answer is the budget's, whatever
the collection's size; only the shortlist's search grows with it.

Labels name the document with its tag: ``2:c12`` is chunk ``c12`` of the run's document 2, ``2:c12.3`` its
sentence 3. A document keeps its tag for the life of a thread; a new one is tagged in order of first appearance in
the shortlist (:func:`collection_tags`). A passage whose text an earlier shortlisted passage already holds (the
same paragraph in two documents) is read once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nodes.chain.ordering.tree import ChowLiuTree, build_tree
from nodes.chain.passages import Passage, PassageIndex, indexed, split_passages
from nodes.chain.reading import match, relevance
from nodes.collection.index import collection_index, query_vector
from nodes.collection.resolve import members, thread_tags
from stores.cache import ProcessCache
from stores.errors import InputError
from stores.labels import chunk_label, tagged
from stores.text import truncate_tokens
from stores.vectorstore import Hit, VectorStore, chunk_record_id


@dataclass(frozen=True)
class PoolInfo:
    """What the chain reads of a collection's record: its prompt language (the most common of its documents)."""

    language: str
    doc_id: str = ""


@dataclass
class PoolVectors:
    """The shortlisted chunks: tagged labels, sections and embeddings, in shortlist order."""

    info: PoolInfo
    chunk_ids: list[str]
    sections: list[str]
    matrix: np.ndarray
    doc_ids: list[str]
    """Per chunk, its document's id."""


def shortlist(
    store: VectorStore, collection: Sequence[str], query: str, size: int, indexes: Sequence[str] | None = None
) -> list[str]:
    """Record ids of the ``size`` chunks of the collection most relevant to ``query`` (vector + BM25, fused).

    ``indexes``: the index each document published when the run began (read from the records when not given).
    """
    if not query.strip() or size <= 0:
        return []
    found = collection_index(store, collection, indexes)
    return [h.id for h in found.search(query, size, candidates=2 * size)]


def grown(pool: Sequence[str], more: Sequence[str]) -> list[str]:
    """``pool`` with the ids of ``more`` it lacks appended (so the passages already numbered keep their numbers)."""
    seen = set(pool)
    return [*pool, *(rid for rid in more if rid not in seen)]


def pool_tags(pool: Sequence[str]) -> dict[str, int]:
    """Document id -> tag, in order of first appearance in the shortlist (record ids start with the doc id)."""
    return {doc_id: tag for tag, doc_id in enumerate(dict.fromkeys(rid.split(":", 1)[0] for rid in pool), start=1)}


def pool_documents(namespace: str, pool: Sequence[str], tags: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """The shortlist's documents, ``{tag, doc_id, title, source}``, tagged as its labels are (the thread's ``tags``)."""
    docs = list(pool_tags(pool))
    return [m.to_dict() for m in members(namespace, docs, collection_tags(tags or {}, pool))]


def collection_tags(known: Mapping[str, int], pool: Sequence[str]) -> dict[str, int]:
    """A thread's tags with those of the shortlist's documents: a document the thread has read keeps its tag.

    A new one takes the next, in order of first appearance in the shortlist (on a new thread: :func:`pool_tags`).
    """
    return thread_tags(known, list(pool_tags(pool)))


@dataclass
class PoolReading:
    """What the planner reads a collection with: the shortlist's vectors, tree, passages and their BM25 index.

    It has the interface of the planner's one-document reading.
    """

    store: Any
    doc: PoolVectors
    tree: ChowLiuTree
    passages: PassageIndex
    chunk_index: PassageIndex
    """Each shortlisted chunk as one passage: the chunks' own BM25 scores (what fixed orders rank by)."""

    def cosine(self, text: str) -> np.ndarray:
        """Cosine similarity of every shortlisted chunk to ``text``."""
        query = query_vector(self.store, text)
        norms = np.linalg.norm(self.doc.matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        norms[norms == 0] = 1.0
        return np.asarray((self.doc.matrix @ query) / norms, dtype=np.float64)

    def chunk_match(self, text: str) -> np.ndarray:
        """Standardised dense + BM25 match of every shortlisted chunk to ``text``."""
        return match(self.cosine(text), self.chunk_index.lexical(text))

    def passage_match(self, text: str) -> np.ndarray:
        """Per passage: its chunk's standardised cosine to ``text`` averaged with its own standardised BM25 score."""
        return match(self.cosine(text)[self.passages.chunks], self.passages.lexical(text))

    def relevance(self, state: Any, missing: str, *, passages: bool) -> np.ndarray:
        """Relevance to the question and to what is missing (per passage, or per chunk)."""
        score = self.passage_match if passages else self.chunk_match
        return relevance(*(score(text) for text in (state["question"], missing) if text))


_readings: ProcessCache[tuple[Any, ...], PoolReading] = ProcessCache("collection reading inputs", 8)


def pool_reading(
    store: VectorStore,
    pool: Sequence[str],
    *,
    passage_tokens: int,
    chunk_tokens: int,
    sharpen: float = 0.0,
    exact_max: int = 2000,
    tags: Mapping[str, int] | None = None,
) -> PoolReading:
    """The :class:`PoolReading` of the shortlist ``pool`` (record ids), kept per process between the planner's steps.

    InputError when a chunk of it is gone (a document was re-ingested during the run).
    """
    tags = collection_tags(tags or {}, pool)
    key = (store.collection_name, tuple(pool), passage_tokens, chunk_tokens, sharpen, exact_max, tuple(tags.items()))

    def build() -> PoolReading:
        hits = store.get(list(pool), with_embeddings=True)
        if len(hits) != len(pool):
            raise InputError("the chunks of a document of the collection changed during the run; ask again")
        labels = [tagged(tags[str(h.metadata["doc_id"])], h.chunk_id) for h in hits]
        texts = [truncate_tokens(h.text, chunk_tokens) for h in hits]
        previous = _previous_chunks(store, hits, chunk_tokens)
        passages: list[Passage] = []
        seen: set[str] = set()
        for position, (hit, label, text) in enumerate(zip(hits, labels, texts, strict=True)):
            before = previous.get(hit.id)
            pair = [("prev", before), (label, text)] if before is not None else [(label, text)]
            for p in split_passages(pair, passage_tokens):
                key_text = " ".join(p.text.split()).lower()
                if p.chunk_id != label or key_text in seen:
                    continue
                seen.add(key_text)
                passages.append(Passage(position, label, p.first, p.sentences))
        matrix = np.asarray([h.embedding for h in hits], dtype=np.float32)
        doc = PoolVectors(
            PoolInfo(_language(store, list(pool_tags(pool)))),
            labels,
            [h.section for h in hits],
            matrix,
            [str(h.metadata["doc_id"]) for h in hits],
        )
        tree = build_tree(matrix, temperature=sharpen or None, exact_max=exact_max)
        whole = [Passage(i, label, 1, (text,)) for i, (label, text) in enumerate(zip(labels, texts, strict=True))]
        return PoolReading(store, doc, tree, indexed(passages), indexed(whole))

    return _readings.get_or_build(key, build)


def collection_reading(
    store: VectorStore, pool: Sequence[str], ctx: Any, tags: Mapping[str, int] | None = None
) -> PoolReading:
    """:func:`pool_reading` with a run's settings (``ctx``: a ChainContext) and the thread's ``tags``."""
    from nodes.chain.state import CHUNK_TOKENS

    return pool_reading(
        store,
        pool,
        passage_tokens=ctx.passage_tokens,
        chunk_tokens=CHUNK_TOKENS,
        sharpen=ctx.sharpen,
        exact_max=ctx.exact_max,
        tags=tags,
    )


def tree_edges(reading: PoolReading) -> list[list[Any]]:
    """The shortlist's tree as the output shows it: ``[label, label, weight]``."""
    ids = reading.doc.chunk_ids
    return [[ids[i], ids[j], round(w, 6)] for i, j, w in reading.tree.edges]


def _previous_chunks(store: VectorStore, hits: Sequence[Hit], chunk_tokens: int) -> dict[str, str]:
    """Record id -> text of the chunk before it in its document (what its overlap repeats), when it has one.

    One read of the store, the record ids of the previous chunks made as the ingest makes them.
    """
    wanted = {}
    for hit in hits:
        number = int(hit.chunk_id[1:])
        if number > 0:
            wanted[hit.id] = chunk_record_id(
                str(hit.metadata["doc_id"]), str(hit.metadata["index"]), chunk_label(number - 1)
            )
    found = {h.id: h.text for h in store.get(list(wanted.values()))}
    return {rid: truncate_tokens(found[prev], chunk_tokens) for rid, prev in wanted.items() if prev in found}


def _language(store: VectorStore, doc_ids: Sequence[str]) -> str:
    """The most common language of ``doc_ids`` (the prompts')."""
    from collections import Counter

    from stores.documents import get_document

    if not doc_ids:
        return "en"
    return Counter(get_document(store.namespace, d).language for d in doc_ids).most_common(1)[0][0]
