"""The orderer and the planner: which chunk each chain reads next, and when reading stops.

The orderer resolves the document (``doc_id``, or a ``path`` or ``text`` it ingests), loads (or
builds and caches) the Chow-Liu tree over its chunks and, for fixed orders, plans the order(s).
Before every worker the planner chooses the next chunk (best-first along the tree, scored by the
question and by what the notes say is still missing; or the next chunk of a fixed order) or ends
the chain: when the notes answer the question (``complete``), when the next chunk would exceed the
reading budget (``budget``), or when nothing above the relevance floor is left (``end``). See
:mod:`nodes.chain.reading` for the scores.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Literal

import numpy as np
from langgraph.runtime import Runtime

from graphs.chain.state import CHUNK_TOKENS, ChainContext, ChainState
from graphs.context import validate
from nodes.chain.core import DocumentVectors, cached_tree, document_vectors, plan_orders, query_similarity
from nodes.chain.ordering.traverse import multi_roots
from nodes.chain.reading import ReadingPolicy, best_first, match, next_in_plan, relevance
from nodes.ingest import input_namespace, resolve_document
from nodes.retrieval import index_key, lexical_index
from stores.settings import InputError, check_question
from stores.text import count_tokens, truncate_tokens
from stores.vectorstore import get_store


def orderer(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Ingest if needed, load or build the Chow-Liu tree, and plan the chains."""
    ctx = runtime.context or ChainContext()
    validate(ctx)
    question = check_question(state.get("question") or "")
    namespace = input_namespace(state, ctx)
    doc_id = resolve_document(state, ctx, runtime.stream_writer)
    store = get_store(namespace, ctx.embedder)
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
        orders = plan_orders(
            ctx.order,
            tree=tree,
            doc=doc,
            query_sim=sims,
            root=ctx.root,
            children=ctx.children,
            seed=ctx.seed,
            roots=ctx.roots,
        )
        plan = [[ids[i] for i in o] for o in orders]
    runtime.stream_writer(
        {"stage": "ordered", "message": f"{ctx.order}: {len(ids)} chunks, tree {'cached' if cached else 'built'}"}
    )
    return {
        "question": question,
        "doc_id": doc_id,
        "path": "",
        "text": "",
        "namespace": namespace,
        "language": doc.info.language,
        "chunk_ids": ids,
        "plan": plan,
        "order": [],
        "read": [],
        "skipped": [],
        "stops": [],
        "tree": [[ids[i], ids[j], round(w, 6)] for i, j, w in tree.edges],
        "chain": 0,
        "notes": [],
        **fresh_chain(),
    }


def fresh_chain() -> dict[str, Any]:
    return {"pos": 0, "current": "", "missing": "", "streak": 0, "spent": 0}


_VECTORS: dict[tuple[str, str], np.ndarray] = {}
_VECTORS_MAX = 512


def _similarity(store: Any, matrix: np.ndarray, text: str) -> np.ndarray:
    """Cosine similarity of every chunk to ``text`` (query vectors kept per process: a chain re-asks them)."""
    key = (store.space, text)
    q = _VECTORS.get(key)
    if q is None:
        if len(_VECTORS) >= _VECTORS_MAX:
            _VECTORS.clear()
        q = _VECTORS[key] = np.asarray(store.embedder.embed_query(text), dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0] = 1.0
    return (matrix @ q) / norms


def _match(context: dict[str, Any], text: str) -> np.ndarray:
    """Standardised dense + BM25 match of every chunk to ``text``."""
    store, doc = context["store"], context["doc"]
    lexical = lexical_index(store, doc.info.doc_id).scores(text)
    return match(_similarity(store, doc.matrix, text), np.asarray(lexical, dtype=np.float64))


def _choose(
    state: ChainState, ctx: ChainContext, chain: int, chain_state: dict[str, Any], context: dict[str, Any]
) -> tuple[str | None, str | None, list[str]]:
    """(next chunk, stop reason, chunks passed over) for one chain."""
    ids = state["chunk_ids"]
    order = state.get("order") or []
    read = order[chain] if chain < len(order) else []
    if ctx.early_stop and not ctx.read_all and read and chain_state["streak"] > ctx.confirm:
        return None, "complete", []
    if ctx.max_chunks and len(read) >= ctx.max_chunks:
        return None, "budget", []
    if "rel" not in context:
        context["rel"] = relevance(
            *(_match(context, text) for text in (state["question"], chain_state["missing"]) if text)
        )
    rel = context["rel"]
    floor = None if ctx.read_all else ctx.floor
    index = {cid: i for i, cid in enumerate(ids)}
    plan = state["plan"][chain]
    passed: list[int]
    if ctx.order == "best-first":
        if not read and plan:
            nxt: int | None = index[plan[0]]
            passed = []
        else:
            policy = ReadingPolicy(ctx.tree_weight, ctx.jump_penalty, floor)
            nxt, passed = best_first(context["tree"], [index[c] for c in read], rel, policy)
    else:
        nxt, chain_state["pos"], passed = next_in_plan([index[c] for c in plan], chain_state["pos"], rel, floor)
    skipped = [ids[i] for i in passed]
    if nxt is None:
        return None, "end", skipped
    if ctx.budget and not ctx.read_all and read:
        # the lexical index holds the chunks in the order of ``ids`` (both from ``by_doc``), as ``_match`` relies on
        text = lexical_index(context["store"], state["doc_id"]).hits[nxt].text
        cost = count_tokens(truncate_tokens(text, CHUNK_TOKENS))
        if chain_state["spent"] + cost > ctx.budget:
            return None, "budget", skipped
    return ids[nxt], None, skipped


_READING: OrderedDict[tuple[Any, ...], tuple[DocumentVectors, Any]] = OrderedDict()
_READING_MAX = 8
_READING_LOCK = threading.Lock()


def _reading_inputs(store: Any, doc_id: str, ctx: ChainContext) -> tuple[DocumentVectors, Any]:
    """The document's vectors and Chow-Liu tree, kept per process between the planner's steps
    (keyed by the chunk count and chunking of the document, so a re-ingest is seen)."""
    count = store.count(doc_id=doc_id, kind="chunk")
    key = (*index_key(store, doc_id, count), ctx.sharpen, tuple(ctx.extra_embedders), ctx.exact_max)
    with _READING_LOCK:
        if key in _READING:
            _READING.move_to_end(key)
            return _READING[key]
    doc = document_vectors(store, doc_id)
    tree, _ = cached_tree(
        store, doc, temperature=ctx.sharpen or None, extra_embedders=ctx.extra_embedders, exact_max=ctx.exact_max
    )
    with _READING_LOCK:
        _READING[key] = (doc, tree)
        while len(_READING) > _READING_MAX:
            _READING.popitem(last=False)
    return doc, tree


def planner(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Choose the next chunk of the current chain, or end it (and start the next chain, or hand over)."""
    ctx = runtime.context or ChainContext()
    store = get_store(state["namespace"], ctx.embedder)
    doc, tree = _reading_inputs(store, state["doc_id"], ctx)
    if doc.chunk_ids != state["chunk_ids"]:
        raise InputError(f"the chunks of {state['doc_id']!r} changed during the run; ask again")
    chain = state["chain"]
    chain_state: dict[str, Any] = {k: state.get(k, v) for k, v in fresh_chain().items()}
    notes, stops = list(state.get("notes", [])), list(state.get("stops", []))
    skipped = list(state.get("skipped", []))
    read = set(state.get("read", []))
    update: dict[str, Any] = {}
    while chain < len(state["plan"]):
        context: dict[str, Any] = {"store": store, "doc": doc, "tree": tree}
        nxt, reason, passed = _choose(state, ctx, chain, chain_state, context)
        skipped += [c for c in passed if c not in skipped and c not in read]
        if nxt is not None:
            update.update({"chain": chain, **chain_state, "next": nxt, "skipped": skipped})
            return update
        notes.append(chain_state["current"])
        stops.append(reason or "end")
        runtime.stream_writer({"stage": "reading", "message": _stop_message(reason or "end", state, chain, skipped)})
        chain += 1
        chain_state = fresh_chain()
        update = {"notes": notes, "stops": stops}
    return {**update, "chain": chain, **chain_state, "next": "", "skipped": skipped, "stopped": _overall(stops)}


def _overall(stops: list[str]) -> str:
    """One stop reason for the run: budget if any chain ran out of it, else complete if any was, else end."""
    for reason in ("budget", "complete", "end"):
        if reason in stops:
            return reason
    return "end"


def _stop_message(reason: str, state: ChainState, chain: int, skipped: list[str]) -> str:
    order = state.get("order") or []
    read = len(order[chain]) if chain < len(order) else 0
    what = {"complete": "the notes answer the question", "budget": "reading budget reached", "end": "nothing left"}
    prefix = f"chain {chain + 1}: " if len(state["plan"]) > 1 else ""
    return (
        f"{prefix}stopped ({reason}: {what[reason]}) after reading {read} of {len(state['chunk_ids'])} chunks, "
        f"{len(skipped)} skipped"
    )


def next_step(state: ChainState) -> Literal["worker", "manager"]:
    """A chunk was chosen, or hand over to the manager."""
    return "worker" if state.get("next") else "manager"
