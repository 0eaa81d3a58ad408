"""The offloader agent (the ``offload`` node): a finished turn becomes a one-line conclusion and facts to pin.

With an offloading policy the raw exchange goes to the offload store under ``o<turn>`` (a large answer
under ``o<turn>a``) and the history keeps the conclusion; other policies keep the answer verbatim.
:func:`compress_turn` writes the note (checked against the exchange, with the answer's first
sentence as the fallback); :func:`update_pinned` keeps the pinned state (goal, facts) small.
"""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

import prompts
from nodes.offload.canvas import content_terms
from nodes.offload.chat import answer_message
from nodes.offload.context import OffloadContext
from nodes.offload.memory import OFFLOADING
from nodes.offload.state import OffloadState, call_record, session_context, session_documents
from stores.chat_stream import unstreamed
from stores.models import LLM, ModelOutputError, llm_for, messages
from stores.offload import OffloadItem, get_offload_store
from stores.text import count_tokens, overlap, split_sentences, truncate_tokens
from stores.usage import relabel_usage, track_usage


class OffloadNote(BaseModel):
    """The offloader's note on a finished turn."""

    conclusion: str = Field(description="One line of at most 25 words keeping the answer's facts.")
    facts: list[str] = Field(default_factory=list, max_length=3, description="Facts to pin, at most 15 words each.")
    goal: str = Field(default="", description="The user's overall goal in at most 12 words, or empty.")


def first_sentence(text: str, tokens: int = 30) -> str:
    """The first sentence of ``text``, cut to about ``tokens``."""
    sentences = split_sentences(" ".join(text.split()))
    return truncate_tokens(sentences[0] if sentences else text.strip(), tokens)


def _stems(text: str) -> set[str]:
    return {t[:5] for t in content_terms(text)}


def supported(claim: str, source: str, min_share: float = 0.6) -> bool:
    """True when most content words of ``claim`` (compared by their first 5 letters) occur in ``source``."""
    words = _stems(claim)
    return bool(words) and overlap(words, _stems(source)) >= min_share


def compress_turn(
    llm: LLM,
    *,
    question: str,
    answer: str,
    pinned: dict[str, Any],
    lang: str,
    max_tokens: int,
    answer_tokens: int = 200,
    system_prompt: str | None = None,
) -> tuple[OffloadNote, str]:
    """The offloader's note on a finished turn; on invalid output, the answer's first sentence.

    The note is checked against the exchange: facts whose words are mostly absent from the
    question and answer are dropped, and an unsupported conclusion is replaced by the answer's first
    sentence. Returns the note and an error message (empty when the model's note was used).
    ``system_prompt`` is the context's ``offloader_prompt`` (None: the template file in ``lang``).
    """
    none = "（无）" if lang == "zh" else "(none)"
    facts = "\n".join(f"- {f}" for f in pinned.get("facts", [])) or none
    system = prompts.render("offload/offloader", lang, template=system_prompt)
    user = prompts.render(
        "offload/offloader_user",
        lang,
        goal=pinned.get("goal") or none,
        facts=facts,
        question=question,
        answer=truncate_tokens(answer, answer_tokens),
    )
    try:
        note = llm.structured(messages(system, user), OffloadNote, max_tokens=max_tokens)
    except ModelOutputError as exc:
        return OffloadNote(conclusion=first_sentence(answer)), str(exc)
    source = f"{question} {answer}"
    conclusion = note.conclusion.strip()
    if not conclusion or not supported(conclusion, source, 0.5):
        conclusion = first_sentence(answer)
    kept = [f for f in note.facts if supported(f, source)]
    return note.model_copy(update={"conclusion": conclusion, "facts": kept}), ""


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def update_pinned(
    pinned: dict[str, Any], note: OffloadNote, *, max_facts: int, fact_tokens: int = 25, goal_tokens: int = 20
) -> dict[str, Any]:
    """Pinned state after a turn: the goal kept once set, new facts added (no repeats), the newest ``max_facts``."""
    goal = str(pinned.get("goal", "")).strip() or truncate_tokens(note.goal.strip(), goal_tokens)
    facts = [str(f) for f in pinned.get("facts", [])]
    seen = {_norm(f) for f in facts}
    for fact in note.facts:
        fact = truncate_tokens(" ".join(fact.split()), fact_tokens)
        if fact and _norm(fact) not in seen:
            facts.append(fact)
            seen.add(_norm(fact))
    return {"goal": goal, "facts": facts[-max_facts:] if max_facts > 0 else []}


def offload(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """The offloader: conclusion + pinned facts for the finished turn; raw text to the offload store.

    Appends the answer to ``messages`` (with its citations and what was offloaded and recalled) and
    clears the question, so the next turn may come as a human message alone.
    """
    ctx = session_context(state, runtime)
    turn, question, reply = int(state["turn"]), state.get("asked") or state["question"], state.get("answer", "")
    lang = state.get("lang", "en")
    record: dict[str, Any] = {
        "turn": turn,
        "question": question,
        "details": [d["chunk_id"] for d in state.get("details", [])],
        "quotes": [str(s["label"]) for s in state.get("sources", []) if s.get("label")],
        "citations": list(state.get("citations", [])),
    }
    history = list(state.get("history", []))
    if ctx.policy not in OFFLOADING:
        history.append({**record, "answer": reply})
        return {"history": history, "messages": [answer_message(state, [])], "question": ""}

    store = get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend)
    session, doc_id = state["session"], session_documents(state)[0]
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
            system_prompt=ctx.offloader_prompt,
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
