"""The worker and the manager: the model calls of a Chain-of-Agents run.

Each worker reads the chunk the planner chose and passes the notes on; the manager writes the
answer, with citations, from the last notes of every chain.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from graphs.chain.state import CHUNK_TOKENS, ChainContext, ChainState
from nodes.chain.core import manager_answer, valid_citations, worker_step
from stores.models import llm_for
from stores.settings import InputError
from stores.usage import merge_usage, track_usage, usage_totals
from stores.vectorstore import get_store


def worker(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Read the chosen chunk and pass the notes on."""
    ctx = runtime.context or ChainContext()
    chain, chunk_id = state["chain"], state["next"]
    store = get_store(state["namespace"], ctx.embedder)
    hits = store.chunks(state["doc_id"], [chunk_id])
    if not hits:
        raise InputError(f"chunk {chunk_id} of {state['doc_id']} is missing from the store; re-ingest the document")
    with track_usage() as usage:
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
    runtime.stream_writer(
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
        "usage": usage,
        "relevant": [chunk_id] if result.relevant else [],
    }


def _streak(streak: int, result: Any) -> int:
    """Informative workers in a row that found the notes complete (a chunk that adds nothing does not count)."""
    if not result.relevant:
        return streak
    return streak + 1 if result.complete else 0


def manager(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Write the final answer with citations from the chains' last notes."""
    ctx = runtime.context or ChainContext()
    notes = state.get("notes") or [""]
    with track_usage() as usage:
        answer = manager_answer(
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
