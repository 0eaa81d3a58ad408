"""Chain-of-Agents question answering with Chow-Liu ordering.

    orderer -> worker -> worker -> ... -> manager

The orderer ingests the document if a path is given, loads (or builds and caches) the Chow-Liu
tree over its chunks, and plans the order(s) the workers read them in. Each worker step reads
one chunk and rewrites the notes it passes on; with multi-root voting several chains run one
after the other and the manager reconciles their last notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, NotRequired

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

from graphs.context import Context, resolve_context
from nodes.chain import (
    cached_tree,
    check_question,
    document_vectors,
    manager_answer,
    plan_orders,
    query_similarity,
    valid_citations,
    worker_step,
)
from nodes.ingest import ingest_for_context
from nodes.orderer import CHILD_ORDERS, ORDERS, ROOT_STRATEGIES
from stores.models import Usage, llm_for, merge_usage, usage_totals
from stores.settings import InputError, ModelError
from stores.vectorstore import get_store


def _d(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class ChainContext(Context):
    """Settings of a Chain-of-Agents run."""

    order: str = field(default="chow-liu-bfs", metadata=_d(f"Chunk order: one of {', '.join(ORDERS)}."))
    root: str = field(default="query", metadata=_d("Tree root: query (most similar chunk), degree or weight."))
    children: str = field(default="weight", metadata=_d("Visit children by edge weight or by question relevance."))
    roots: int = field(default=1, metadata=_d("Chains to run from different roots (multi-root voting); 1 = one chain."))
    max_chunks: int = field(default=0, metadata=_d("Read at most this many chunks per chain (0 = all)."))
    sharpen: float = field(default=0.0, metadata=_d("Similarity sharpening temperature T for exp(sim/T); 0 = off."))
    extra_embedders: list[str] = field(
        default_factory=list, metadata=_d("Other embedders whose similarities are averaged into the tree weights.")
    )
    seed: int = field(default=0, metadata=_d("Seed of the random order."))
    note_words: int = field(default=80, metadata=_d("Word budget of each worker's notes."))
    worker_max_tokens: int = field(default=200, metadata=_d("Most tokens a worker may write."))
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
    """Private state: where the workers are."""

    chain: int
    """Index of the chain being read."""
    step: int
    """Index of the next chunk of the current chain."""
    current: str
    """Notes of the chain being read."""
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


def orderer(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Ingest if needed, load or build the Chow-Liu tree, and plan the reading order(s)."""
    ctx = resolve_context(runtime, ChainContext)
    _check_context(ctx)
    question = check_question(state.get("question"))
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
    orders = plan_orders(
        ctx.order,
        tree=tree,
        doc=doc,
        query_sim=sims,
        root=ctx.root,
        children=ctx.children,
        seed=ctx.seed,
        roots=ctx.roots,
        max_chunks=ctx.max_chunks,
    )
    ids = doc.chunk_ids
    _writer()(
        {"stage": "ordered", "message": f"{ctx.order}: {len(ids)} chunks, tree {'cached' if cached else 'built'}"}
    )
    return {
        "question": question,
        "doc_id": doc_id,
        "namespace": namespace,
        "language": doc.info.language,
        "order": [[ids[i] for i in o] for o in orders],
        "tree": [[ids[i], ids[j], round(w, 6)] for i, j, w in tree.edges],
        "chain": 0,
        "step": 0,
        "current": "",
        "notes": [],
    }


def worker(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Read the next chunk of the current chain and rewrite the notes."""
    ctx = resolve_context(runtime, ChainContext)
    chain, step = state["chain"], state["step"]
    order = state["order"][chain]
    chunk_id = order[step]
    store = get_store(state["namespace"], ctx.embedder)
    hits = store.get([f"{state['doc_id']}:{chunk_id}"])
    if not hits:
        raise InputError(f"chunk {chunk_id} of {state['doc_id']} is missing from the store; re-ingest the document")
    notes, relevant, usage = worker_step(
        llm_for("worker", ctx),
        question=state["question"],
        notes=state.get("current", ""),
        chunk=hits[0],
        position=step + 1,
        total=len(order),
        lang=state.get("language", "en"),
        words=ctx.note_words,
        max_tokens=ctx.worker_max_tokens,
    )
    total = sum(len(o) for o in state["order"])
    done = sum(len(o) for o in state["order"][:chain]) + step + 1
    _writer()({"stage": "workers", "done": done, "total": total, "chunk": chunk_id, "relevant": relevant})
    update: dict[str, Any] = {"current": notes, "usage": usage, "relevant": [chunk_id] if relevant else []}
    if step + 1 < len(order):
        update["step"] = step + 1
    else:
        update.update({"notes": [*state.get("notes", []), notes], "chain": chain + 1, "step": 0, "current": ""})
    return update


def next_step(state: ChainState) -> Literal["worker", "manager"]:
    """More chunks to read, or hand over to the manager."""
    return "worker" if state["chain"] < len(state["order"]) and state["order"][state["chain"]] else "manager"


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
    known = [cid for order in state["order"] for cid in order]
    total_usage = merge_usage(state.get("usage"), usage)
    return {
        "answer": answer.answer.strip(),
        "explanation": answer.explanation.strip(),
        "citations": valid_citations(answer, known, notes),
        "usage": usage,
        "calls": usage_totals(total_usage)["calls"],
    }


_retry = RetryPolicy(max_attempts=3, retry_on=(ModelError, ConnectionError, TimeoutError))

builder = StateGraph(ChainState, context_schema=ChainContext, input_schema=ChainInput, output_schema=ChainOutput)
builder.add_node("orderer", orderer)
builder.add_node("worker", worker, retry_policy=_retry)
builder.add_node("manager", manager, retry_policy=_retry)
builder.add_edge(START, "orderer")
builder.add_conditional_edges("orderer", next_step)
builder.add_conditional_edges("worker", next_step)
builder.add_edge("manager", END)

RECURSION_LIMIT = 100_000
"""Every worker is one graph step: allow chains over very long documents."""

graph = builder.compile().with_config(recursion_limit=RECURSION_LIMIT)
graph.name = "chain"
