"""The end of a turn: the ``offload`` node writes the finished exchange into the history.

With an offloading policy the offloader turns the exchange into a one-line conclusion and facts to
pin, the raw exchange goes to the offload store under ``o<turn>`` (a large answer under
``o<turn>a``), and the history keeps the conclusion; other policies keep the answer verbatim.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

import prompts
from graphs.offload.state import OffloadContext, OffloadState, call_record, session_context
from nodes.offload.chat import answer_message
from nodes.offload.memory import OFFLOADING
from nodes.offload.offloader import compress_turn, update_pinned
from stores.chat_stream import unstreamed
from stores.models import llm_for
from stores.offload import OffloadItem, get_offload_store
from stores.text import count_tokens, truncate_tokens
from stores.usage import relabel_usage, track_usage


def offload(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """The offloader: conclusion + pinned facts for the finished turn; raw text to the offload store.

    Appends the answer to ``messages`` (with its citations and what was offloaded and recalled) and
    clears the question, so the next turn may come as a human message alone.
    """
    ctx = session_context(state, runtime)
    turn, question, reply = int(state["turn"]), state["question"], state.get("answer", "")
    lang = state.get("lang", "en")
    record: dict[str, Any] = {
        "turn": turn,
        "question": question,
        "details": [d["chunk_id"] for d in state.get("details", [])],
        "citations": list(state.get("citations", [])),
    }
    history = list(state.get("history", []))
    if ctx.policy not in OFFLOADING:
        history.append({**record, "answer": reply})
        return {"history": history, "messages": [answer_message(state, [])], "question": ""}

    store = get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend)
    session, doc_id = state["session"], state["doc_id"]
    offloaded: list[dict[str, Any]] = []
    kept_answer = reply
    if count_tokens(reply) > ctx.large_output_tokens:
        big = OffloadItem(
            id=f"o{turn}a", session=session, doc_id=doc_id, turn=turn, role="output", text=reply, summary=question
        )
        store.put(big)
        offloaded.append({"id": big.id, "kind": "output", "tokens": big.tokens, "summary": "answer"})
        kept_answer = (
            truncate_tokens(reply, ctx.large_output_tokens // 2)
            + " "
            + prompts.render("offload/shortened", lang, id=big.id)
        )
    with track_usage() as usage, unstreamed():
        note, error = compress_turn(
            llm_for("offloader", ctx),
            question=question,
            answer=reply,
            pinned=state.get("pinned") or {},
            lang=lang,
            max_tokens=ctx.offloader_max_tokens,
        )
    conclusion = truncate_tokens(" ".join(note.conclusion.split()), ctx.conclusion_tokens)
    raw = prompts.render(
        "offload/turn_full",
        lang,
        turn=turn,
        details=", ".join(record["details"]) or "-",
        question=question,
        answer=kept_answer,
    )
    item = OffloadItem(
        id=f"o{turn}", session=session, doc_id=doc_id, turn=turn, role="exchange", text=raw, summary=conclusion
    )
    store.put(item)
    offloaded.insert(0, {"id": item.id, "kind": "exchange", "tokens": item.tokens, "summary": conclusion})
    history.append({**record, "offload_id": item.id, "conclusion": conclusion})
    pinned = update_pinned(state.get("pinned") or {}, note, max_facts=ctx.max_facts)
    calls = list(state.get("calls", []))
    if usage:
        calls.append(call_record("offloader", usage))
    message = f"offloaded {', '.join(o['id'] for o in offloaded)}: {conclusion}"
    if error:
        message += f" (offloader output invalid, kept the answer's first sentence: {error[:100]})"
    runtime.stream_writer({"stage": "offload", "message": message})
    return {
        "history": history,
        "messages": [answer_message(state, offloaded)],
        "question": "",
        "pinned": pinned,
        "offloaded": offloaded,
        "usage": relabel_usage(usage, "offloader"),
        "calls": calls,
    }
