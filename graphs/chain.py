"""Chain-of-Agents question answering with anytime reading over the Chow-Liu tree.

    orderer -> planner -> worker -> planner -> worker -> ... -> planner -> manager

The orderer ingests the document if a path is given, loads (or builds and caches) the Chow-Liu
tree over its chunks and, for fixed orders, plans the order(s). Before every worker the planner
chooses the next chunk (best-first along the tree, scored by the question and by what the notes
say is still missing; or the next chunk of a fixed order) or ends the chain: when the notes answer
the question (``complete``), when the next chunk would exceed the reading budget (``budget``), or
when nothing above the relevance floor is left (``end``). Each worker reads one chunk and passes
the notes on. With multi-root voting several chains run one after the other and the manager
reconciles their last notes. See :mod:`nodes.reading` for the scores.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, NotRequired

import numpy as np
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

from graphs.context import Context, resolve_context
from nodes.chain import (
    DocumentVectors,
    cached_tree,
    document_vectors,
    manager_answer,
    plan_orders,
    query_similarity,
    valid_citations,
    worker_step,
)
from nodes.ingest import ingest_for_context
from nodes.ordering.orders import ORDERS
from nodes.ordering.traverse import CHILD_ORDERS, ROOT_STRATEGIES, multi_roots
from nodes.reading import DEFAULT_BUDGET, DEFAULT_FLOOR, ReadingPolicy, best_first, match, next_in_plan, relevance
from nodes.retrieval import index_key, lexical_index
from stores.models import Usage, llm_for, merge_usage, transient, usage_totals
from stores.settings import InputError, check_question
from stores.text import count_tokens, truncate_tokens
from stores.vectorstore import get_store

CHUNK_TOKENS = 1200
"""Most tokens of one chunk a worker reads (longer chunks are cut)."""


def _d(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class ChainContext(Context):
    """Settings of a Chain-of-Agents run."""

    order: str = field(default="best-first", metadata=_d(f"Chunk order: one of {', '.join(ORDERS)}."))
    budget: int = field(
        default=DEFAULT_BUDGET,
        metadata=_d("Tokens of chunk text each chain may read (0 = no limit); then the manager answers."),
    )
    floor: float = field(
        default=DEFAULT_FLOOR,
        metadata=_d("Chunks less relevant than this (standard deviations above the mean) are skipped without a call."),
    )
    early_stop: bool = field(default=True, metadata=_d("Stop reading as soon as the notes answer the question."))
    confirm: int = field(
        default=1,
        metadata=_d("Further informative workers that must also find the notes complete before reading stops."),
    )
    read_all: bool = field(
        default=False, metadata=_d("Read every chunk: no budget, no floor, no early stop (the full chain).")
    )
    tree_weight: float = field(default=0.5, metadata=_d("best-first: weight of the tree edge to the chunks read."))
    jump_penalty: float = field(default=1.0, metadata=_d("best-first: score a chunk off the tree frontier gives up."))
    root: str = field(default="query", metadata=_d("Tree root: query (most similar chunk), degree or weight."))
    children: str = field(default="weight", metadata=_d("Visit children by edge weight or by question relevance."))
    roots: int = field(default=1, metadata=_d("Chains to run from different roots (multi-root voting); 1 = one chain."))
    max_chunks: int = field(default=0, metadata=_d("Read at most this many chunks per chain (0 = no limit)."))
    sharpen: float = field(default=0.0, metadata=_d("Similarity sharpening temperature T for exp(sim/T); 0 = off."))
    extra_embedders: list[str] = field(
        default_factory=list, metadata=_d("Other embedders whose similarities are averaged into the tree weights.")
    )
    seed: int = field(default=0, metadata=_d("Seed of the random order."))
    note_words: int = field(default=50, metadata=_d("Word budget of each worker's new facts."))
    worker_max_tokens: int = field(default=160, metadata=_d("Most tokens a worker may write."))
    manager_max_tokens: int = field(default=200, metadata=_d("Most tokens the manager may write."))
    exact_max: int = field(default=2000, metadata=_d("Largest chunk count for the exact dense tree; sparse above."))


class ChainInput(TypedDict):
    """A question about a document."""

    question: str
    """The question to answer."""
    doc_id: NotRequired[str]
    """Id of an ingested document (or give `path`)."""
    path: NotRequired[str]
    """Path of a document to ingest first (txt, md, pdf, docx, html)."""
    namespace: NotRequired[str]
    """Namespace of the document (default: the context's)."""


class ChainOutput(TypedDict):
    """The answer and how it was reached."""

    answer: str
    """Short answer."""
    explanation: str
    """One sentence of justification with citations."""
    citations: list[str]
    """Chunk ids that support the answer."""
    order: list[list[str]]
    """Chunk ids in the order the workers read them, one list per chain."""
    read: list[str]
    """Chunk ids read by any chain, in first-read order."""
    skipped: list[str]
    """Chunk ids passed over without a model call (relevance below the floor)."""
    stopped: str
    """Why reading ended: complete (the notes answer the question), budget, or end (nothing left worth reading)."""
    tree: list[list[Any]]
    """Chow-Liu tree edges as [chunk id, chunk id, weight]."""
    notes: list[str]
    """Last notes of every chain."""
    usage: Annotated[Usage, merge_usage]
    """Tokens in/out and calls per role."""
    calls: int
    """LLM calls made."""
    doc_id: str
    """Id of the document."""


class ChainState(ChainInput, ChainOutput, total=False):
    """Private state: where the chains are."""

    chunk_ids: list[str]
    """All chunk ids of the document, in document order."""
    plan: list[list[str]]
    """Per chain: the planned order (fixed orders) or the root (best-first)."""
    stops: list[str]
    """Why each finished chain stopped."""
    chain: int
    """Index of the chain being read."""
    pos: int
    """Position in the current chain's plan (fixed orders)."""
    current: str
    """Notes of the chain being read."""
    missing: str
    """What the current chain's last informative worker said is missing."""
    streak: int
    """Workers in a row that found the notes complete."""
    spent: int
    """Tokens of chunk text the current chain has read."""
    next: str
    """Chunk the next worker reads ("" when the chains are done)."""
    relevant: Annotated[list[str], lambda a, b: (a or []) + (b or [])]
    """Chunk ids whose workers found something relevant."""
    language: str
    """Prompt language (the document's)."""


def _writer() -> Any:
    try:
        return get_stream_writer()
    except RuntimeError:
        return lambda _event: None


def _check_context(ctx: ChainContext) -> None:
    if ctx.order not in ORDERS:
        raise InputError(f"unknown order {ctx.order!r}; choose one of {', '.join(ORDERS)}")
    if ctx.root not in ROOT_STRATEGIES:
        raise InputError(f"unknown root strategy {ctx.root!r}; choose one of {', '.join(ROOT_STRATEGIES)}")
    if ctx.children not in CHILD_ORDERS:
        raise InputError(f"unknown child order {ctx.children!r}; choose one of {', '.join(CHILD_ORDERS)}")
    if ctx.roots < 1:
        raise InputError("roots must be at least 1")
    if ctx.budget < 0 or ctx.max_chunks < 0 or ctx.confirm < 0:
        raise InputError("budget, max_chunks and confirm must not be negative")


def orderer(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Ingest if needed, load or build the Chow-Liu tree, and plan the chains."""
    ctx = resolve_context(runtime, ChainContext)
    _check_context(ctx)
    question = check_question(state.get("question") or "")
    namespace = state.get("namespace") or ctx.namespace
    doc_id = state.get("doc_id")
    if not doc_id:
        if not state.get("path"):
            raise InputError("give the document as doc_id or path")
        doc_id = ingest_for_context(state["path"], replace(ctx, namespace=namespace), _writer())
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
    _writer()(
        {"stage": "ordered", "message": f"{ctx.order}: {len(ids)} chunks, tree {'cached' if cached else 'built'}"}
    )
    return {
        "question": question,
        "doc_id": doc_id,
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
        **_fresh_chain(),
    }


def _fresh_chain() -> dict[str, Any]:
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
    ctx = resolve_context(runtime, ChainContext)
    store = get_store(state["namespace"], ctx.embedder)
    doc, tree = _reading_inputs(store, state["doc_id"], ctx)
    if doc.chunk_ids != state["chunk_ids"]:
        raise InputError(f"the chunks of {state['doc_id']!r} changed during the run; ask again")
    chain = state["chain"]
    chain_state = {k: state.get(k, v) for k, v in _fresh_chain().items()}
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
        _writer()({"stage": "reading", "message": _stop_message(reason or "end", state, chain, skipped)})
        chain += 1
        chain_state = _fresh_chain()
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


def worker(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Read the chosen chunk and pass the notes on."""
    ctx = resolve_context(runtime, ChainContext)
    chain, chunk_id = state["chain"], state["next"]
    store = get_store(state["namespace"], ctx.embedder)
    hits = store.get([f"{state['doc_id']}:{chunk_id}"])
    if not hits:
        raise InputError(f"chunk {chunk_id} of {state['doc_id']} is missing from the store; re-ingest the document")
    result = worker_step(
        llm_for("worker", ctx),
        question=state["question"],
        notes=state.get("current", ""),
        chunk=hits[0],
        lang=state.get("language", "en"),
        words=ctx.note_words,
        max_tokens=ctx.worker_max_tokens,
        chunk_tokens=CHUNK_TOKENS,
    )
    order = [list(o) for o in state.get("order") or []]
    while len(order) <= chain:
        order.append([])
    order[chain].append(chunk_id)
    read = list(state.get("read", []))
    if chunk_id not in read:
        read.append(chunk_id)
    skipped = [c for c in state.get("skipped", []) if c != chunk_id]
    _writer()(
        {
            "stage": "reading",
            "done": len(read),
            "total": len(state["chunk_ids"]),
            "chunk": chunk_id,
            "relevant": result.relevant,
            "postfix": f"read {len(read)}, skipped {len(skipped)}",
        }
    )
    return {
        "order": order,
        "read": read,
        "skipped": skipped,
        "current": result.notes,
        "missing": result.missing if result.relevant or not state.get("missing") else state["missing"],
        "streak": _streak(state.get("streak", 0), result),
        "spent": state.get("spent", 0) + result.chunk_tokens,
        "usage": result.usage,
        "relevant": [chunk_id] if result.relevant else [],
    }


def _streak(streak: int, result: Any) -> int:
    """Informative workers in a row that found the notes complete (a chunk that adds nothing does not count)."""
    if not result.relevant:
        return streak
    return streak + 1 if result.complete else 0


def next_step(state: ChainState) -> Literal["worker", "manager"]:
    """A chunk was chosen, or hand over to the manager."""
    return "worker" if state.get("next") else "manager"


def manager(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Write the final answer with citations from the chains' last notes."""
    ctx = resolve_context(runtime, ChainContext)
    notes = state.get("notes") or [""]
    answer, usage = manager_answer(
        llm_for("manager", ctx),
        question=state["question"],
        chain_notes=notes,
        lang=state.get("language", "en"),
        max_tokens=ctx.manager_max_tokens,
    )
    known = list(state.get("read", []))
    total_usage = merge_usage(state.get("usage"), usage)
    return {
        "answer": answer.answer.strip(),
        "explanation": answer.explanation.strip(),
        "citations": valid_citations(answer, known, notes),
        "usage": usage,
        "calls": usage_totals(total_usage)["calls"],
    }


_retry = RetryPolicy(max_attempts=2, retry_on=transient)

builder = StateGraph(ChainState, context_schema=ChainContext, input_schema=ChainInput, output_schema=ChainOutput)
builder.add_node("orderer", orderer)
builder.add_node("planner", planner)
builder.add_node("worker", worker, retry_policy=_retry)
builder.add_node("manager", manager, retry_policy=_retry)
builder.add_edge(START, "orderer")
builder.add_edge("orderer", "planner")
builder.add_conditional_edges("planner", next_step)
builder.add_edge("worker", "planner")
builder.add_edge("manager", END)

RECURSION_LIMIT = 100_000
"""Every worker is one graph step: allow chains over very long documents."""

graph = builder.compile().with_config(recursion_limit=RECURSION_LIMIT)
graph.name = "chain"
