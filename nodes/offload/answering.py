"""The answering part of a turn: ``retrieve`` the details, ``answer`` from the working memory, ``recall``.

The working memory is assembled within ``token_budget`` by :mod:`nodes.offload`; the model
answers with chunk citations, or asks to recall offloaded ids (at most one recall round per turn).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

import prompts
from graphs.offload.state import OffloadContext, OffloadState, call_record, session_context
from nodes.offload.answer import ask, citations_of, normalise_ids, resolve_recall
from nodes.offload.canvas import Canvas, load_canvas, mermaid_key, touched_nodes
from nodes.offload.memory import OFFLOADING, Piece, build_memory
from nodes.offload.pieces import detail_pieces, full_details, history_pieces, pinned_piece, select_details
from stores.chat_stream import streamed_field
from stores.models import llm_for
from stores.offload import get_offload_store
from stores.usage import relabel_usage, track_usage
from stores.vectorstore import get_store


def _canvas(ctx: OffloadContext, doc_id: str) -> Canvas | None:
    if ctx.policy != "offload_canvas":
        return None
    return load_canvas(get_store(ctx.namespace, ctx.embedder), doc_id)


def retrieve(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Details for this turn: chunks over the relevance threshold and those of canvas nodes the question touches."""
    ctx = session_context(state, runtime)
    store = get_store(ctx.namespace, ctx.embedder)
    question, doc_id = state["question"], state["doc_id"]
    canvas_refs: list[dict[str, Any]] = []
    drawn = _canvas(ctx, doc_id)
    if drawn is not None:
        ids = drawn.mermaid_ids()
        for node, score in touched_nodes(
            drawn, question, store.embedder, limit=ctx.canvas_nodes, min_score=ctx.canvas_min_score
        ):
            canvas_refs.append(
                {"chunk_id": node.chunk_ids[0], "score": score, "via": f"canvas:{ids[mermaid_key(node.id)]}"}
            )
    refs = select_details(
        store,
        doc_id,
        question,
        k=ctx.details_k,
        min_score=ctx.min_score,
        min_details=ctx.min_details,
        canvas_refs=canvas_refs,
    )
    runtime.stream_writer(
        {"stage": "retrieve", "message": "details: " + (", ".join(r["chunk_id"] for r in refs) or "none")}
    )
    return {"details": refs}


def _older_relevant(ctx: OffloadContext, state: OffloadState) -> list[str]:
    """Offload ids of older turns (beyond keep_turns) relevant to the question."""
    history = state.get("history", [])
    older = {t["offload_id"] for t in history[: max(0, len(history) - ctx.keep_turns)] if t.get("offload_id")}
    if not older or ctx.history_hits <= 0:
        return []
    offload = get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend)
    hits = offload.search(state["session"], state["question"], k=ctx.history_hits + ctx.keep_turns + 2)
    return [item.id for item, score in hits if item.id in older and score >= ctx.history_min_score][: ctx.history_hits]


def answer(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Assemble the working memory within the budget and ask the model (answer, or ids to recall).

    The only model call of a turn that LangGraph's ``messages`` stream shows: the answer's text
    as it is written (:func:`stores.chat_stream.streamed_field`), as the AI message ``reply_id``.
    """
    ctx = session_context(state, runtime)
    store = get_store(ctx.namespace, ctx.embedder)
    lang, question, doc_id = state.get("lang", "en"), state["question"], state["doc_id"]
    offloading = ctx.policy in OFFLOADING
    history = state.get("history", [])
    round_ = int(state.get("recall_round") or 0)
    can_recall = offloading and round_ == 0 and any(t.get("offload_id") for t in history)

    pieces: list[Piece] = []
    drawn = _canvas(ctx, doc_id)
    if drawn is not None:
        pieces.append(Piece("canvas", "canvas", drawn.map_text(), "canvas"))
    if offloading:
        pinned = pinned_piece(state.get("pinned") or {}, lang)
        if pinned is not None:
            pieces.append(pinned)
    pieces += history_pieces(
        history,
        ctx.policy,
        ctx.keep_turns,
        lang,
        details_text=lambda ids: full_details(store, doc_id, ids, question, ctx.detail_tokens),
        relevant=_older_relevant(ctx, state) if offloading else (),
    )
    pieces += detail_pieces(
        store, doc_id, state.get("details", []), question, ctx.detail_tokens, lang, recallable=can_recall
    )
    if round_ and state.get("recall_ids"):
        recalled, _ = resolve_recall(
            state["recall_ids"],
            offload_store=get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend),
            session=state["session"],
            chunk_store=store,
            doc_id=doc_id,
            chunks=int(state.get("chunks") or 0),
            recall_tokens=ctx.recall_tokens,
            lang=lang,
        )
        pieces += recalled
    system = prompts.render("offload/answer_recall" if can_recall else "offload/answer", lang)
    memory = build_memory(system, pieces, question, lang, ctx.token_budget, "notes" if offloading else "verbatim")
    with track_usage() as usage, streamed_field("answer") as shown:
        reply, mode = ask(
            llm_for("expert", ctx), memory, recall=can_recall, max_tokens=ctx.answer_max_tokens, lang=lang
        )
    step = "answer_after_recall" if round_ else "answer"
    calls = [*state.get("calls", []), call_record(step, usage, estimated=memory.tokens, mode=mode)]
    update: dict[str, Any] = {
        "usage": relabel_usage(usage, "answer"),
        "calls": calls,
        "memory": {**memory.parts, "total": memory.tokens},
        "cut": memory.cut,
        "input_tokens": calls[-1]["input"],
        "reply_id": shown.message_id,
    }
    if memory.cut:
        runtime.stream_writer({"stage": "budget", "message": "token budget: " + "; ".join(memory.cut)})
    requested: list[str] = []
    if can_recall:
        shown_whole = {p.key for p in memory.pieces if p.section == "details" and not p.shortened}
        requested = [i for i in normalise_ids(getattr(reply, "recall", [])) if i not in shown_whole]
    if requested:
        update["recall_ids"] = requested
        update["answer"] = reply.answer.strip()
        return update
    update["answer"] = reply.answer.strip()
    update["citations"] = citations_of(reply, int(state.get("chunks") or 0))
    return update


def route_answer(state: OffloadState) -> Literal["recall", "offload"]:
    """One recall round when the model asked for ids; otherwise the turn is done."""
    return "recall" if state.get("recall_ids") and not state.get("recall_round") else "offload"


def recall(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Load the ids the model asked for (unknown ids become a note to it) for a second answer."""
    ctx = session_context(state, runtime)
    _, report = resolve_recall(
        state["recall_ids"],
        offload_store=get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend),
        session=state["session"],
        chunk_store=get_store(ctx.namespace, ctx.embedder),
        doc_id=state["doc_id"],
        chunks=int(state.get("chunks") or 0),
        recall_tokens=ctx.recall_tokens,
        lang=state.get("lang", "en"),
    )
    shown = ", ".join(f"{r['id']}{'' if r['found'] else ' (unknown)'}" for r in report)
    runtime.stream_writer({"stage": "recall", "message": f"recall: {shown}"})
    return {"recalled": report, "recall_round": 1}
