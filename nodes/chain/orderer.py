"""The orderer: the document resolved, its Chow-Liu tree loaded (or built and cached), the chains planned.

The orderer resolves the document (``doc_id``, or a ``path`` or ``text`` it ingests) and loads the
Chow-Liu tree over the chunk embeddings, built once per document and cached beside it
(:mod:`nodes.chain.ordering` holds the algorithms); only the root and the traversal depend on the
question. For fixed orders it turns the tree into the order(s) the workers read the chunks in; for
best-first reading, where the planner (:mod:`nodes.chain.planner`) chooses as it goes, it picks the
chains' roots.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from nodes.chain.context import ChainContext
from nodes.chain.ordering.orders import order_chunks
from nodes.chain.ordering.traverse import multi_roots
from nodes.chain.ordering.tree import ChowLiuTree, build_tree
from nodes.chain.pool import collection_reading, collection_tags, pool_documents, shortlist, tree_edges
from nodes.chain.state import ChainState
from nodes.collection.index import published_indexes
from nodes.collection.resolve import members, run_documents, run_fields, thread_tags
from nodes.context import validate
from nodes.ingest import index_document, input_namespace
from stores.documents import DocumentInfo, cache_path, document_text, get_document, index_identity, write_atomic
from stores.errors import InputError
from stores.loaders import load_text
from stores.questions import check_question
from stores.vectorstore import VectorStore, get_store


def orderer(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Ingest if needed, load or build the Chow-Liu tree, and plan the chains."""
    ctx = runtime.context or ChainContext()
    validate(ctx)
    question = check_question(state.get("question") or "")
    namespace = input_namespace(state, ctx)
    documents = run_documents(state, ctx, runtime.stream_writer)
    store = get_store(namespace, ctx.embedder)
    if len(documents) > 1:
        known = state.get("tags") or {}
        return collection_orderer(store, ctx, question, documents, runtime.stream_writer, known)
    doc_id = documents[0]
    doc = document_vectors(store, doc_id)
    tree, cached = cached_tree(
        store, doc, temperature=ctx.sharpen or None, extra_embedders=ctx.extra_embedders, exact_max=ctx.exact_max
    )
    sims = query_similarity(store, doc, question)
    ids = doc.chunk_ids
    if ctx.order == "best-first":
        starts = multi_roots(tree, sims, n_roots=ctx.roots) if ctx.roots > 1 else []
        plan = [[ids[r]] for r in starts] or [[]]
    else:
        orders = plan_orders(ctx, tree=tree, doc=doc, query_sim=sims)
        plan = [[ids[i] for i in o] for o in orders]
    runtime.stream_writer(
        {"stage": "ordered", "message": f"{ctx.order}: {len(ids)} chunks, tree {'cached' if cached else 'built'}"}
    )
    edges = [[ids[i], ids[j], round(w, 6)] for i, j, w in tree.edges]
    tags = thread_tags(state.get("tags") or {}, documents)
    listed = [m.to_dict() for m in members(namespace, documents, tags)]
    return planned(question, documents, namespace, doc.info.language, ids, plan, edges, documents=listed, tags=tags)


def collection_orderer(
    store: VectorStore,
    ctx: ChainContext,
    question: str,
    documents: list[str],
    emit: Any,
    known: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Shortlist the chunks of the collection most relevant to the question and plan the chains over them.

    The chains are planned by :mod:`nodes.chain.pool`: a collection is read best-first, within the budget.
    ``known``: the tags the thread's documents already have (:func:`nodes.chain.pool.collection_tags`).
    """
    if ctx.order != "best-first" or ctx.read_all:
        raise InputError(
            "a collection is read best-first within the budget: use order best-first without read_all "
            f"(order {ctx.order!r}{' with read_all' if ctx.read_all else ''} reads one document)"
        )
    indexes = published_indexes(store.namespace, documents)
    pool = shortlist(store, documents, question, ctx.shortlist, indexes)
    if not pool:
        raise InputError("the documents of the collection have no chunks in this embedder's vector space")
    tags = collection_tags(known or {}, pool)
    reading = collection_reading(store, pool, ctx, tags)
    ids = reading.doc.chunk_ids
    starts = multi_roots(reading.tree, reading.cosine(question), n_roots=ctx.roots) if ctx.roots > 1 else []
    total = sum(get_document(store.namespace, d).chunks for d in documents)
    emit({"stage": "ordered", "message": f"best-first: {len(ids)} of {total} chunks of {len(documents)} documents"})
    shortlisted = {
        "collection": documents,
        "indexes": indexes,
        "pool": pool,
        "expanded": [question],
        "documents": pool_documents(store.namespace, pool, tags),
        "tags": tags,
    }
    plan = [[ids[r]] for r in starts] or [[]]
    language = reading.doc.info.language
    return planned(question, documents, store.namespace, language, ids, plan, tree_edges(reading), **shortlisted)


def planned(
    question: str,
    doc_ids: Sequence[str],
    namespace: str,
    language: str,
    chunk_ids: list[str],
    plan: list[list[str]],
    tree: list[list[Any]],
    **shortlisted: Any,
) -> dict[str, Any]:
    """The state a run starts reading from: its documents, chunks, plan and tree, nothing read yet.

    ``shortlisted``: the run's ``documents`` and ``tags``, and a collection's shortlist state
    (:func:`collection_orderer`). The input fields that named the documents are cleared once resolved
    (:func:`~nodes.collection.resolve.run_fields`), and a collection's state is emptied when not given (a thread's
    next run may read one document).
    """
    empty: dict[str, Any] = {"collection": [], "indexes": [], "documents": [], "pool": [], "expanded": []}
    unread: dict[str, Any] = {"order": [], "read": [], "passages": [], "skipped": [], "stops": [], "dropped": 0}
    return {
        "question": question,
        **run_fields(doc_ids),
        **empty,
        **shortlisted,
        "namespace": namespace,
        "language": language,
        "chunk_ids": chunk_ids,
        "plan": plan,
        **unread,
        "batch": [],
        "tree": tree,
        "chain": 0,
        "notes": [],
        **fresh_chain(),
    }


def fresh_chain() -> dict[str, Any]:
    """A new chain state: at the start, nothing current or missing, nothing spent or taken."""
    return {"pos": 0, "current": "", "missing": "", "streak": 0, "spent": 0, "extended": 0, "taken": []}


@dataclass
class DocumentVectors:
    """A document's chunks (ids, sections) and their embeddings, in document order."""

    info: DocumentInfo
    chunk_ids: list[str]
    sections: list[str]
    matrix: np.ndarray


def document_vectors(store: VectorStore, doc_id: str) -> DocumentVectors:
    """Chunk ids, sections and embeddings of an ingested document."""
    info = get_document(store.namespace, doc_id)
    hits = store.by_doc(doc_id, with_embeddings=True)
    if not hits:
        raise InputError(f"document {doc_id!r} has no chunks in namespace {store.namespace!r}; ingest it first")
    matrix = np.asarray([h.embedding for h in hits], dtype=np.float32)
    return DocumentVectors(info, [h.chunk_id for h in hits], [h.section for h in hits], matrix)


def _extra_vectors(namespace: str, doc_id: str, embedder: str, expected: list[str]) -> np.ndarray:
    """Embeddings of the same document in another embedder's space (indexed there on first use)."""
    store = get_store(namespace, embedder)
    info = get_document(namespace, doc_id)
    if store.count(doc_id=doc_id, kind="chunk") != len(expected):
        text = document_text(namespace, doc_id)
        index_document(
            load_text(text, title=info.title, source=info.source),
            store,
            chunk_size=info.chunk_size,
            chunk_overlap=info.chunk_overlap,
            record=False,
        )
    hits = store.by_doc(doc_id, with_embeddings=True)
    if [h.chunk_id for h in hits] != expected:
        raise InputError(f"the chunks of {doc_id!r} differ between embedders; re-ingest the document")
    return np.asarray([h.embedding for h in hits], dtype=np.float32)


def cached_tree(
    store: VectorStore,
    doc: DocumentVectors,
    *,
    temperature: float | None = None,
    extra_embedders: Sequence[str] = (),
    exact_max: int = 2000,
) -> tuple[ChowLiuTree, bool]:
    """The document's Chow-Liu tree, from the per-document cache when it was built from the same index."""
    tag = "+".join([store.space, *extra_embedders])
    shape = f"{re.sub(r'[^a-z0-9+.-]+', '-', tag.lower())}-t{temperature or 0}-x{exact_max}"
    key = f"chowliu-{shape}-i{index_identity(doc.info)}.json"
    path = cache_path(store.namespace, doc.info.doc_id, key)
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("n") == len(doc.chunk_ids):
            return ChowLiuTree.from_dict(data), True
    matrices = [doc.matrix] + [
        _extra_vectors(store.namespace, doc.info.doc_id, name, doc.chunk_ids) for name in extra_embedders
    ]
    tree = build_tree(matrices if len(matrices) > 1 else doc.matrix, temperature=temperature, exact_max=exact_max)
    write_atomic(path, json.dumps(tree.to_dict()))
    return tree, False


def query_similarity(store: VectorStore, doc: DocumentVectors, question: str) -> np.ndarray:
    """Cosine similarity of every chunk to the question."""
    q = np.asarray(store.embedder.embed_query(question), dtype=np.float32)
    norms = np.linalg.norm(doc.matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0] = 1.0
    return np.asarray((doc.matrix @ q) / norms)


def plan_orders(
    ctx: ChainContext, *, tree: ChowLiuTree, doc: DocumentVectors, query_sim: np.ndarray
) -> list[list[int]]:
    """One chunk order per chain (several when multi-root voting).

    The context gives the ``order``, its ``root`` and ``children`` rules, the ``seed`` and the number of ``roots``.
    """
    order, root, children, seed, roots = ctx.order, ctx.root, ctx.children, ctx.seed, ctx.roots
    n = len(doc.chunk_ids)
    common: dict[str, Any] = {
        "n": n,
        "tree": tree,
        "query_sim": query_sim,
        "sections": doc.sections,
        "children": children,
        "seed": seed,
        "embeddings": doc.matrix,
    }
    if roots > 1 and order.startswith("chow-liu"):
        starts = multi_roots(tree, query_sim, n_roots=roots)
        orders = [order_chunks(order, root=int(r), **common) for r in starts]
    elif roots > 1 and order == "random":
        orders = [order_chunks(order, root=root, **{**common, "seed": seed + i}) for i in range(roots)]
    else:
        orders = [order_chunks(order, root=root, **common)]
    return orders
