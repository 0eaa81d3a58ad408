"""The answering part of a turn: ``answer`` from the working memory, ``recall``.

The working memory (the quotes the turn's reading kept, :mod:`nodes.offload.reading`, with the canvas, the
pinned state and the history) is assembled within ``token_budget`` (:mod:`nodes.offload.memory`); the answering
call has its reply schemas and citations, and the recall round. The quotes the answer cites are its sources.

With offloaded turns in the history the model may answer or ask to recall ids (``o3`` for an
offloaded turn, ``c7`` for a chunk); :func:`resolve_recall` loads them (unknown ids become a note to
the model) for one more answering call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

import prompts
from nodes.chain.passages import quoted_sentences
from nodes.collection.sources import Sources
from nodes.offload.canvas import Canvas
from nodes.offload.chat import answer_message, render_sources
from nodes.offload.collection_canvas import session_canvas
from nodes.offload.context import OffloadContext
from nodes.offload.memory import OFFLOADING, Memory, Piece, build_memory
from nodes.offload.pieces import evidence_pieces, history_pieces, pinned_piece, quoted_lines
from nodes.offload.state import OffloadState, call_record, session_context, session_documents
from stores.chat_stream import stream_more, streamed_field
from stores.labels import CITED, LABEL, chunk_of, normalise_chunk_id
from stores.models import LLM, ModelOutputError, llm_for, messages
from stores.offload import OffloadStore, get_offload_store, is_offload_id
from stores.pages import page_fields
from stores.text import content_words, count_tokens
from stores.usage import relabel_usage, track_usage
from stores.vectorstore import get_store

_ID = re.compile(r"^\[?\s*((?:\d{1,5}:)?[oc]\d{1,6}[a-z]?)\s*\]?$", re.IGNORECASE)


class AnswerReply(BaseModel):
    """The answering model's reply."""

    answer: str = Field(
        description="The shortest complete answer first, at most 3 short sentences, with [c3.2]-style citations."
    )
    citations: list[str] = Field(
        default_factory=list, max_length=8, description="Labels of the quotes used, such as c3.2."
    )


class RecallReply(BaseModel):
    """The answering model's reply when offloaded turns can be recalled.

    ``recall`` comes first and is required, so the model writes it before the answer: whether the
    answer is the turn's (and so streams to chat clients) is known before its first word.
    """

    recall: list[str] = Field(
        max_length=3,
        description="Ids (o2, c7) whose full text is needed before answering; empty when the memory suffices.",
    )
    answer: str = Field(
        description="The shortest complete answer first, at most 3 short sentences, with [c3.2]-style citations."
    )
    citations: list[str] = Field(
        default_factory=list, max_length=8, description="Labels of the quotes used, such as c3.2."
    )


QUOTE_WORDS = 40
"""Most words of a sentence quoted as a source."""


def quote_sources(sources: Sources, evidence: str, cited: Sequence[str], answer: str = "") -> list[dict[str, Any]]:
    """The quotes the answer rests on, as the sources it shows: those it cites, by label or by chunk.

    When the answer says what its cited quotes do not (a small model cites the quote that names the person and
    not the one that says what they did), the kept quotes that hold the rest of its words follow, marked
    ``cited: False`` (:func:`supporting`). An answer that cites none shows every quote of the evidence, all
    marked so. Each source names its document by title or file name.
    """
    quotes = quoted_sentences(evidence)
    wanted = set(cited)
    chosen = [label for label in quotes if label in wanted or chunk_of(label) in wanted]
    shown = {label: True for label in chosen}
    for label in supporting(answer, quotes, chosen) if chosen else quotes:
        shown.setdefault(label, False)
    names = {m.doc_id: m.name for m in sources.members}
    pages = sources.pages(list(shown))
    sections = {h.chunk_id: h.section for h in sources.chunks([chunk_of(label) for label in shown])}
    out: list[dict[str, Any]] = []
    for label, marked in shown.items():
        found = sources.locate(chunk_of(label))
        if found is None:
            continue
        words = " ".join(quotes[label].split()).split(" ")
        quote = " ".join(words[:QUOTE_WORDS]) + (" ..." if len(words) > QUOTE_WORDS else "")
        title = names.get(found[0]) or found[0]
        out.append(
            {
                "doc_id": found[0],
                "title": title,
                "chunk_id": chunk_of(label),
                "label": label,
                "quote": quote,
                "cited": marked,
                "section": sections.get(chunk_of(label), ""),
                **page_fields(pages.get(label)),
            }
        )
    return out


def supporting(answer: str, quotes: Mapping[str, str], chosen: Sequence[str]) -> list[str]:
    """The quotes not in ``chosen`` that hold the answer's content words ``chosen`` lacks, the one holding most first.

    Each must add at least two of those words (one when the answer has fewer than three).
    """
    lacking = content_words(answer) - set().union(*(content_words(quotes[label]) for label in chosen))
    least = 1 if len(lacking) < 3 else 2
    found: list[str] = []
    while lacking:
        gains = {label: len(content_words(text) & lacking) for label, text in quotes.items() if label not in chosen}
        best = max(gains, key=lambda label: gains[label], default=None)
        if best is None or gains[best] < least or best in found:
            break
        found.append(best)
        lacking -= content_words(quotes[best])
    return found


def citations_of(reply: AnswerReply | RecallReply, labels: Sequence[str]) -> list[str]:
    """Chunk labels the answer cites (its list and its ``[c3]`` / ``[2:c3]`` markers) that name a chunk.

    ``labels``: every chunk label of the session's documents (:meth:`Sources.labels`).
    """
    known = set(labels)
    found = [re.sub(r"\s+", "", str(raw)).strip("[]") for raw in [*reply.citations, *CITED.findall(reply.answer)]]
    cited = [normalise_chunk_id(chunk_of(raw)) for raw in found]
    return list(dict.fromkeys(label for label in cited if label in known))


def ask(
    llm: LLM, memory: Memory, *, recall: bool, max_tokens: int, lang: str, plain_prompt: str | None = None
) -> tuple[AnswerReply | RecallReply, str]:
    """One answering call: schema-enforced JSON, or plain text when the JSON stays invalid.

    Returns the reply and ``"json"`` or ``"text"`` (how the answer was obtained); an empty
    plain-text answer is a ModelOutputError, never an answer. ``plain_prompt`` is the context's
    ``answer_plain_prompt`` (None: the template file in ``lang``).
    """
    schema: type[AnswerReply | RecallReply] = RecallReply if recall else AnswerReply
    try:
        return llm.structured(memory.messages(), schema, max_tokens=max_tokens), "json"
    except ModelOutputError:
        system = prompts.render("offload/answer_plain", lang, template=plain_prompt)
        with track_usage() as spent:
            text = llm.text(messages(system, memory.user), max_tokens=max_tokens)
        if not text.strip():
            raise ModelOutputError(f"the {llm.role} model gave no answer, as JSON or as text", spent) from None
        return AnswerReply(answer=text.strip(), citations=[]), "text"


def normalise_ids(raw: Sequence[str]) -> list[str]:
    """Ids the model asked for, cleaned (``[O2]`` -> ``o2``), unique, in order; blanks dropped."""
    out: list[str] = []
    for item in raw:
        text = str(item).strip()
        if not text:
            continue
        match = _ID.match(text)
        out.append(match.group(1).lower() if match else text[:40])
    return list(dict.fromkeys(out))


def resolve_recall(
    ids: Sequence[str],
    *,
    offload_store: OffloadStore,
    session: str,
    sources: Sources,
    recall_tokens: int,
    lang: str,
) -> tuple[list[Piece], list[dict[str, Any]]]:
    """Load recalled ids as pieces; unknown ids become a note to the model.

    Returns pieces and a report. Chunks are recalled by their labels in the session's ``sources`` (``c3``, in a
    collection ``2:c3``).
    """
    offloaded = {i.id: i for i in offload_store.get(session, [i for i in ids if is_offload_id(i)])}
    hits = {h.chunk_id: h for h in sources.chunks([i for i in ids if LABEL.match(i) and "." not in i])}
    known = [i.id for i in offload_store.list(session)]
    pieces: list[Piece] = []
    report: list[dict[str, Any]] = []
    for rank, rid in enumerate(ids):
        if rid in offloaded:
            text, source = offloaded[rid].text, "offload"
        elif rid in hits:
            text, source = hits[rid].text, "chunk"
        else:
            note = prompts.render("offload/recall_unknown", lang, id=rid, known=", ".join(known) or "-")
            pieces.append(Piece("recalled", rid, note, "fixed"))
            report.append({"id": rid, "found": False, "source": "", "tokens": 0})
            continue
        text = " ".join(text.split()) if source == "chunk" else text.strip()
        piece = Piece("recalled", rid, text, "recalled", rank=-rank, head=f"[{rid}] ")
        if count_tokens(text) > recall_tokens:
            piece = piece.shrink(recall_tokens)
        pieces.append(piece)
        report.append({"id": rid, "found": True, "source": source, "tokens": count_tokens(piece.body)})
    return pieces, report


def _canvas(ctx: OffloadContext, sources: Sources) -> Canvas | None:
    return session_canvas(sources, ctx.canvas_max_nodes) if ctx.policy == "offload_canvas" else None


def _older_relevant(ctx: OffloadContext, state: OffloadState) -> list[str]:
    """Offload ids of older turns (beyond keep_turns) relevant to the question."""
    history = state.get("history", [])
    older = {t["offload_id"] for t in history[: max(0, len(history) - ctx.keep_turns)] if t.get("offload_id")}
    if not older or ctx.history_hits <= 0:
        return []
    offload = get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend)
    hits = offload.search(
        state["session"], state.get("asked") or state["question"], k=ctx.history_hits + ctx.keep_turns + 2
    )
    return [item.id for item, score in hits if item.id in older and score >= ctx.history_min_score][: ctx.history_hits]


def answer(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Assemble the working memory within the budget and ask the model (answer, or ids to recall).

    The only model call of a turn that LangGraph's ``messages`` stream shows: the answer's text
    as it is written (:func:`stores.chat_stream.streamed_field`), as the AI message ``reply_id``.
    """
    ctx = session_context(state, runtime)
    store = get_store(ctx.namespace, ctx.embedder)
    lang, question = state.get("lang", "en"), state.get("asked") or state["question"]
    sources = Sources(store, session_documents(state), state.get("tags"))
    offloading = ctx.policy in OFFLOADING
    history = state.get("history", [])
    round_ = int(state.get("recall_round") or 0)
    can_recall = offloading and round_ == 0 and any(t.get("offload_id") for t in history)

    pieces: list[Piece] = []
    drawn = _canvas(ctx, sources)
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
        details_text=lambda labels: quoted_lines(sources, labels),
        relevant=_older_relevant(ctx, state) if offloading else (),
    )
    pieces += evidence_pieces(state.get("evidence", ""), question)
    report: list[dict[str, Any]] = []
    if not state.get("asked") and offloading and history and not round_ and history[-1].get("offload_id"):
        # a turn about the conversation itself ("say it shorter") sees the last exchange in full
        last, report = resolve_recall(
            [history[-1]["offload_id"]],
            offload_store=get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend),
            session=state["session"],
            sources=sources,
            recall_tokens=ctx.recall_tokens,
            lang=lang,
        )
        pieces += last
    if round_ and state.get("recall_ids"):
        recalled, report = resolve_recall(
            state["recall_ids"],
            offload_store=get_offload_store(ctx.namespace, ctx.embedder, ctx.offload_backend),
            session=state["session"],
            sources=sources,
            recall_tokens=ctx.recall_tokens,
            lang=lang,
        )
        shown = ", ".join(f"{r['id']}{'' if r['found'] else ' (unknown)'}" for r in report)
        runtime.stream_writer({"stage": "recall", "message": f"recall: {shown}"})
        pieces += recalled
    if can_recall:
        system = prompts.render("offload/answer_recall", lang, template=ctx.answer_recall_prompt)
    else:
        system = prompts.render("offload/answer", lang, template=ctx.answer_prompt)
    memory = build_memory(system, pieces, question, lang, ctx.token_budget, "notes" if offloading else "verbatim")
    with track_usage() as usage, streamed_field("answer", hold="recall" if can_recall else "") as written:
        reply, mode = ask(
            llm_for("expert", ctx),
            memory,
            recall=can_recall,
            max_tokens=ctx.answer_max_tokens,
            lang=lang,
            plain_prompt=ctx.answer_plain_prompt,
        )
    step = "answer_after_recall" if round_ else "answer"
    calls = [*state.get("calls", []), call_record(step, usage, estimated=memory.tokens, mode=mode)]
    update: dict[str, Any] = {
        "usage": relabel_usage(usage, "answer"),
        "calls": calls,
        "memory": {**memory.parts, "total": memory.tokens},
        "cut": memory.cut,
        "input_tokens": calls[-1]["input"],
        "reply_id": written.message_id,
        **({"recalled": report} if report else {}),
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
    update["citations"] = citations_of(reply, sources.labels())
    cited = [re.sub(r"\s+", "", str(raw)).strip("[]") for raw in [*reply.citations, *CITED.findall(reply.answer)]]
    # every answer shows what backs it: the quotes it cites, else every quote the reading kept, marked as such
    update["sources"] = quote_sources(sources, state.get("evidence", ""), cited, update["answer"])
    if not written.shown and update["answer"]:  # held back while it might have asked to recall: show it now
        stream_more(written.message_id, update["answer"])
    rendered = render_sources(update["sources"], lang)
    if rendered:  # the sources end the streamed message as they end the kept one
        stream_more(written.message_id, "\n\n" + rendered)
    return {**update, "messages": [answer_message({**state, **update}, [])]}  # kept while the turn is offloaded


def route_answer(state: OffloadState) -> Literal["recall", "offload"]:
    """One recall round when the model asked for ids; otherwise the turn is done."""
    return "recall" if state.get("recall_ids") and not state.get("recall_round") else "offload"


def recall(state: OffloadState) -> dict[str, Any]:
    """Open the recall round: the second answering call loads the ids the model asked for, once.

    They are loaded by :func:`resolve_recall` (unknown ids become a note to the model) and reported as
    ``recalled``.
    """
    return {"recall_round": 1}
