"""The orderer: the run's documents resolved, the chunks it reads chosen, their Chow-Liu tree built, the chains planned.

The orderer resolves the documents (``doc_id``, ``doc_ids``, a file or folder ``path``, ``text``, the whole
namespace; one document or many, read the same way), chooses the chunks the run reads (every chunk, or a
shortlist: :mod:`nodes.chain.pool`) and builds the Chow-Liu tree over their embeddings
(:mod:`nodes.chain.ordering` holds the algorithms). For fixed orders it turns the tree into the order(s) the
workers read the chunks in; for best-first reading, where the planner (:mod:`nodes.chain.planner`) chooses as it
goes, it picks the chains' roots. :func:`cached_tree` keeps one document's tree beside it for the benchmarks that
order a document's chunks without a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from nodes.chain.context import ChainContext
from nodes.chain.ordering.orders import order_chunks
from nodes.chain.ordering.traverse import multi_roots
from nodes.chain.ordering.tree import ChowLiuTree, build_tree
from nodes.chain.pool import PoolVectors, collection_tags, pool_documents, run_pool, run_reading, tree_edges
from nodes.chain.state import ChainState
from nodes.collection.index import published_indexes
from nodes.collection.resolve import run_documents, run_fields
from nodes.context import validate
from nodes.ingest import input_namespace
from stores.documents import DocumentInfo, cache_path, get_document, index_identity, write_atomic
from stores.errors import InputError
from stores.questions import check_question
from stores.vectorstore import VectorStore, get_store


def orderer(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Ingest if needed, choose the chunks the run reads, build their Chow-Liu tree, and plan the chains.

    The run reads every chunk of its documents, or a shortlist of them when they hold more than ``whole_max``
    (:func:`nodes.chain.pool.run_pool`); a shortlist is read best-first within the budget.
    """
    ctx = runtime.context or ChainContext()
    validate(ctx)
    question = check_question(state.get("question") or "")
    namespace = input_namespace(state, ctx)
    documents = run_documents(state, ctx, runtime.stream_writer)
    store = get_store(namespace, ctx.embedder)
    indexes = published_indexes(namespace, documents)
    held = sum(get_document(namespace, d).chunks for d in documents)
    pool, shortlisted = run_pool(store, documents, question, ctx, indexes, held)
    if shortlisted and ctx.order != "best-first":
        raise InputError(
            f"documents of more than {ctx.whole_max} chunks are read best-first within the budget through a "
            f"shortlist: use order best-first (or read_all to read every chunk), not {ctx.order!r}"
        )
    if not pool:
        raise InputError("the documents of the run have no chunks in this embedder's vector space; ingest them first")
    tags = collection_tags(state.get("tags") or {}, pool)
    reading = run_reading(store, pool, ctx, documents, tags)
    ids = reading.doc.chunk_ids
    sims = reading.cosine(question)
    if ctx.order == "best-first":
        starts = multi_roots(reading.tree, sims, n_roots=ctx.roots) if ctx.roots > 1 else []
        plan = [[ids[r]] for r in starts] or [[]]
    else:
        plan = [[ids[i] for i in o] for o in plan_orders(ctx, tree=reading.tree, doc=reading.doc, query_sim=sims)]
    runtime.stream_writer(
        {"stage": "ordered", "message": f"{ctx.order}: {len(ids)} of {held} chunks (documents: {len(documents)})"}
    )
    read_from = {
        "collection": documents,
        "indexes": indexes,
        "pool": pool,
        "shortlisted": shortlisted,
        "expanded": [question],
        "documents": pool_documents(namespace, pool, tags),
        "tags": tags,
    }
    language = reading.doc.info.language
    return planned(question, documents, namespace, language, ids, plan, tree_edges(reading), **read_from)


def planned(
    question: str,
    doc_ids: Sequence[str],
    namespace: str,
    language: str,
    chunk_ids: list[str],
    plan: list[list[str]],
    tree: list[list[Any]],
    **read_from: Any,
) -> dict[str, Any]:
    """The state a run starts reading from: its documents, chunks, plan and tree, nothing read yet.

    ``read_from``: the run's ``documents``, ``tags`` and the chunks it reads (:func:`orderer`). The input fields
    that named the documents are cleared once resolved (:func:`~nodes.collection.resolve.run_fields`).
    """
    empty: dict[str, Any] = {"collection": [], "indexes": [], "documents": [], "pool": [], "expanded": []}
    unread: dict[str, Any] = {"order": [], "read": [], "passages": [], "skipped": [], "stops": [], "dropped": 0}
    return {
        "question": question,
        **run_fields(doc_ids),
        **empty,
        "shortlisted": False,
        **read_from,
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


def cached_tree(
    store: VectorStore,
    doc: DocumentVectors,
    *,
    temperature: float | None = None,
    exact_max: int = 2000,
) -> tuple[ChowLiuTree, bool]:
    """The document's Chow-Liu tree, from the per-document cache when it was built from the same index."""
    tag = store.space
    shape = f"{re.sub(r'[^a-z0-9+.-]+', '-', tag.lower())}-t{temperature or 0}-x{exact_max}"
    key = f"chowliu-{shape}-i{index_identity(doc.info)}.json"
    path = cache_path(store.namespace, doc.info.doc_id, key)
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("n") == len(doc.chunk_ids):
            return ChowLiuTree.from_dict(data), True
    tree = build_tree(doc.matrix, temperature=temperature, exact_max=exact_max)
    write_atomic(path, json.dumps(tree.to_dict()))
    return tree, False


def query_similarity(store: VectorStore, doc: DocumentVectors, question: str) -> np.ndarray:
    """Cosine similarity of every chunk to the question."""
    q = np.asarray(store.embedder.embed_query(question), dtype=np.float32)
    norms = np.linalg.norm(doc.matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0] = 1.0
    return np.asarray((doc.matrix @ q) / norms)


def plan_orders(
    ctx: ChainContext, *, tree: ChowLiuTree, doc: DocumentVectors | PoolVectors, query_sim: np.ndarray
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
