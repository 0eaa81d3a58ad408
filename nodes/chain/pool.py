"""The chunks a run reads: every chunk of its documents, or a shortlist of them, read best-first over one tree.

A run reads a set of one or more documents the same way. When they hold at most ``whole_max`` chunks (2,000 by
default: as many as an exact tree is built over) it reads all of them (:func:`whole_pool`); a larger set is not
read whole: the run shortlists the chunks most relevant to the question across all of them
(:class:`~nodes.collection.index.CollectionIndex`: the store's vector search over the documents' published
indexes fused with BM25 summed from per-document term counts), and when a worker names a missing piece the
chunks most relevant to it join the shortlist (at its end, so the passages already numbered keep their numbers).
So the cost of an answer is the budget's, whatever the documents' size; only the shortlist's search grows with it.
Either way the chunks are cut into passages and one Chow-Liu tree is built over them (:class:`Reading`).

In a run over several documents labels name the document with its tag: ``2:c12`` is chunk ``c12`` of the run's
document 2, ``2:c12.3`` its sentence 3 (a run over one document writes ``c12``). A document keeps its tag for the
life of a thread; a new one is tagged in order of first appearance among the chunks read
(:func:`collection_tags`). A passage whose text a passage of another document already holds (the same paragraph
in two documents) is read once.
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
from nodes.collection.resolve import label_tags, members, run_label, thread_tags
from stores.cache import ProcessCache
from stores.documents import get_document
from stores.errors import InputError
from stores.labels import chunk_label
from stores.text import truncate_tokens
from stores.vectorstore import Hit, VectorStore, chunk_record_id, get_store


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
class Reading:
    """What the planner reads a run's chunks with: their vectors, tree, passages and BM25 indexes."""

    store: Any
    doc: PoolVectors
    tree: ChowLiuTree
    passages: PassageIndex
    chunk_index: PassageIndex
    """Each chunk as one passage: the chunks' own BM25 scores (what fixed orders rank by)."""

    def cosine(self, text: str) -> np.ndarray:
        """Cosine similarity of every chunk to ``text``."""
        query = query_vector(self.store, text)
        norms = np.linalg.norm(self.doc.matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        norms[norms == 0] = 1.0
        return np.asarray((self.doc.matrix @ query) / norms, dtype=np.float64)

    def chunk_match(self, text: str) -> np.ndarray:
        """Standardised dense + BM25 match of every chunk to ``text``."""
        return match(self.cosine(text), self.chunk_index.lexical(text))

    def passage_match(self, text: str) -> np.ndarray:
        """Per passage: its chunk's standardised cosine to ``text`` averaged with its own standardised BM25 score."""
        return match(self.cosine(text)[self.passages.chunks], self.passages.lexical(text))

    def relevance(self, state: Any, missing: str, *, passages: bool) -> np.ndarray:
        """Relevance to the question and to what is missing (per passage, or per chunk)."""
        score = self.passage_match if passages else self.chunk_match
        return relevance(*(score(text) for text in (state["question"], missing) if text))


_readings: ProcessCache[tuple[Any, ...], Reading] = ProcessCache("chain reading inputs", 8)


def whole_pool(store: VectorStore, documents: Sequence[str]) -> list[str]:
    """Record ids of every chunk of ``documents``, document after document, each in position order."""
    return [h.id for doc_id in documents for h in store.by_doc(doc_id)]


def run_pool(
    store: VectorStore, documents: Sequence[str], question: str, ctx: Any, indexes: Sequence[str], held: int
) -> tuple[list[str], bool]:
    """The chunks a run starts reading (record ids) and whether they are a shortlist.

    Every chunk of the documents (``held`` in all), in order, when they hold at most ``ctx.whole_max`` chunks or
    ``read_all`` asks for all; else the ``ctx.shortlist`` most relevant to the question (grown later for each
    missing piece).
    """
    if ctx.read_all or held <= ctx.whole_max:
        return whole_pool(store, documents), False
    return shortlist(store, documents, question, ctx.shortlist, indexes), True


def reading_of(
    store: VectorStore,
    pool: Sequence[str],
    *,
    documents: Sequence[str],
    tags: Mapping[str, int] | None = None,
    passage_tokens: int,
    chunk_tokens: int,
    sharpen: float = 0.0,
    exact_max: int = 2000,
    extra_embedders: Sequence[str] = (),
) -> Reading:
    """The :class:`Reading` of the chunks ``pool`` (record ids) of a run over ``documents``, kept per process.

    The planner reads it at every step. Labels name the document by its tag in a run over several
    (:func:`~nodes.collection.resolve.label_tags`).
    InputError when a chunk of it is gone (a document was re-ingested during the run).
    """
    tags = collection_tags(tags or {}, pool)
    shown = label_tags(documents, tags)
    key = (
        store.collection_name,
        tuple(pool),
        passage_tokens,
        chunk_tokens,
        sharpen,
        exact_max,
        tuple(extra_embedders),
        tuple(shown.items()),
    )

    def build() -> Reading:
        hits = store.get(list(pool), with_embeddings=True)
        if len(hits) != len(pool):
            raise InputError("the chunks of a document of the run changed during the run; ask again")
        labels = [run_label(shown, str(h.metadata["doc_id"]), h.chunk_id) for h in hits]
        texts = [truncate_tokens(h.text, chunk_tokens) for h in hits]
        previous = _previous_chunks(store, hits, chunk_tokens)
        passages: list[Passage] = []
        seen: dict[str, str] = {}  # passage text -> the document it was first read in
        for position, (hit, label, text) in enumerate(zip(hits, labels, texts, strict=True)):
            before = previous.get(hit.id)
            pair = [("prev", before), (label, text)] if before is not None else [(label, text)]
            doc_id = str(hit.metadata["doc_id"])
            for p in split_passages(pair, passage_tokens):
                key_text = " ".join(p.text.split()).lower()
                if p.chunk_id != label or seen.setdefault(key_text, doc_id) != doc_id:
                    continue
                passages.append(Passage(position, label, p.first, p.sentences))
        matrix = np.asarray([h.embedding for h in hits], dtype=np.float32)
        doc = PoolVectors(
            PoolInfo(_language(store, list(pool_tags(pool)))),
            labels,
            [h.section for h in hits],
            matrix,
            [str(h.metadata["doc_id"]) for h in hits],
        )
        matrices = [matrix, *(_extra_vectors(store, name, hits) for name in extra_embedders)]
        tree = build_tree(matrices if len(matrices) > 1 else matrix, temperature=sharpen or None, exact_max=exact_max)
        whole = [Passage(i, label, 1, (text,)) for i, (label, text) in enumerate(zip(labels, texts, strict=True))]
        return Reading(store, doc, tree, indexed(passages), indexed(whole))

    return _readings.get_or_build(key, build)


def run_reading(
    store: VectorStore, pool: Sequence[str], ctx: Any, documents: Sequence[str], tags: Mapping[str, int] | None = None
) -> Reading:
    """:func:`reading_of` with a run's settings (``ctx``: a ChainContext), documents and the thread's ``tags``."""
    from nodes.chain.state import CHUNK_TOKENS

    return reading_of(
        store,
        pool,
        documents=documents,
        tags=tags,
        passage_tokens=ctx.passage_tokens,
        chunk_tokens=CHUNK_TOKENS,
        sharpen=ctx.sharpen,
        exact_max=ctx.exact_max,
        extra_embedders=ctx.extra_embedders,
    )


def _extra_vectors(store: VectorStore, embedder: str, hits: Sequence[Hit]) -> np.ndarray:
    """Embeddings of the same chunks in another embedder's space (their documents indexed there on first use)."""
    from nodes.ingest import index_document
    from stores.documents import document_text
    from stores.loaders import load_text

    other = get_store(store.namespace, embedder)
    for doc_id in dict.fromkeys(str(h.metadata["doc_id"]) for h in hits):
        info = get_document(store.namespace, doc_id)
        if other.count(doc_id=doc_id, kind="chunk") != info.chunks:
            text = document_text(store.namespace, doc_id)
            index_document(
                load_text(text, title=info.title, source=info.source),
                other,
                chunk_size=info.chunk_size,
                chunk_overlap=info.chunk_overlap,
                record=False,
            )
    docs = dict.fromkeys(str(h.metadata["doc_id"]) for h in hits)
    found = {(doc_id, h.chunk_id): h for doc_id in docs for h in other.by_doc(doc_id, with_embeddings=True)}
    wanted = [(str(h.metadata["doc_id"]), h.chunk_id) for h in hits]
    if any(key not in found for key in wanted):
        raise InputError(f"the chunks of a document differ between embedders {store.space!r} and {embedder!r}")
    return np.asarray([found[key].embedding for key in wanted], dtype=np.float32)


def tree_edges(reading: Reading) -> list[list[Any]]:
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

    if not doc_ids:
        return "en"
    return Counter(get_document(store.namespace, d).language for d in doc_ids).most_common(1)[0][0]
