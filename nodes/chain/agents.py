"""The worker and the manager: the model calls of a Chain-of-Agents run.

Each worker reads the passages the planner chose and passes the quotes on; the manager writes the
answer, with citations, from the quotes of every chain.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.chain.context import ChainContext
from nodes.chain.core import is_inferred, manager_answer, supporting_quotes, valid_citations, worker_step
from nodes.chain.planner import reading_inputs
from nodes.chain.state import ChainState
from stores.models import llm_for
from stores.settings import InputError
from stores.usage import merge_usage, track_usage, usage_totals
from stores.vectorstore import get_store


def worker(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Read the chosen passages and pass the quotes on."""
    ctx = runtime.context or ChainContext()
    chain, batch = state["chain"], state["batch"]
    reading = reading_inputs(get_store(state["namespace"], ctx.embedder), state["doc_id"], ctx)
    if reading.doc.chunk_ids != state["chunk_ids"] or max(batch) >= len(reading.passages.passages):
        raise InputError(f"the chunks of {state['doc_id']!r} changed during the run; ask again")
    passages = [reading.passages.passages[i] for i in sorted(batch)]  # shown in document order
    with track_usage() as usage:
        result = worker_step(
            llm_for("worker", ctx),
            question=state["question"],
            notes=state.get("current", ""),
            passages=passages,
            lang=state.get("language", "en"),
            quotes=ctx.quotes,
            max_tokens=ctx.worker_max_tokens,
            max_evidence_tokens=ctx.evidence_tokens,
            previous_missing=state.get("missing", ""),
        )
    touched = list(dict.fromkeys(reading.passages.passages[i].chunk_id for i in batch))  # best passage first
    order = [list(o) for o in state.get("order") or []]
    while len(order) <= chain:
        order.append([])
    order[chain] += [c for c in touched if c not in order[chain]]
    read = list(state.get("read", []))
    read += [c for c in touched if c not in read]
    skipped = [c for c in state.get("skipped", []) if c not in touched]
    quoted = {ln[1:].split(".")[0] for ln in result.notes.splitlines() if ln.startswith("[c")}
    runtime.stream_writer(
        {
            "stage": "reading",
            "done": len(read),
            "total": len(state["chunk_ids"]),
            "chunk": ", ".join(touched),
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
        "taken": [*state.get("taken", []), *batch],
        "passages": [*state.get("passages", []), *(p.span for p in passages)],
        "dropped": state.get("dropped", 0) + result.dropped,
        "usage": usage,
        "relevant": [c for c in touched if c in quoted and result.relevant],
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
    quotes = supporting_quotes(answer, notes)
    return {
        "answer": answer.answer.strip(),
        "explanation": answer.explanation.strip(),
        "quotes": quotes,
        "inferred": is_inferred(answer.answer, quotes),
        "dropped": state.get("dropped", 0),
        "citations": valid_citations(answer, known, notes),
        "usage": usage,
        "calls": usage_totals(total_usage)["calls"],
    }
