"""The answering part of a turn: ``retrieve`` the details, ``answer`` from the working memory, ``recall``.

The working memory is assembled within ``token_budget`` (:mod:`nodes.offload.memory`); the answering call
has its reply schemas and citations, and the recall round.

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
from nodes.collection.sources import Sources, chunk_sentences
from nodes.offload.canvas import Canvas, mermaid_key, touched_nodes
from nodes.offload.chat import answer_message, render_sources
from nodes.offload.collection_canvas import session_canvas
from nodes.offload.context import OffloadContext
from nodes.offload.memory import OFFLOADING, Memory, Piece, build_memory
from nodes.offload.pieces import detail_pieces, full_details, history_pieces, pinned_piece, select_details
from nodes.offload.state import OffloadState, call_record, session_context, session_documents
from stores.chat_stream import stream_more, streamed_field
from stores.labels import CITED, LABEL, normalise_chunk_id, sentence_label
from stores.models import LLM, ModelOutputError, llm_for, messages
from stores.offload import OffloadStore, get_offload_store, is_offload_id
from stores.pages import decode_marks, page_fields, sentence_pages
from stores.text import content_words, count_tokens
from stores.usage import relabel_usage, track_usage
from stores.vectorstore import get_store

_ID = re.compile(r"^\[?\s*((?:\d{1,5}:)?[oc]\d{1,6}[a-z]?)\s*\]?$", re.IGNORECASE)


class AnswerReply(BaseModel):
    """The answering model's reply."""

    answer: str = Field(description="The answer, at most 3 short sentences, with [c3]-style citations.")
    citations: list[str] = Field(default_factory=list, max_length=8, description="Chunk ids used, such as c3.")


class RecallReply(BaseModel):
    """The answering model's reply when offloaded turns can be recalled.

    ``recall`` comes first and is required, so the model writes it before the answer: whether the
    answer is the turn's (and so streams to chat clients) is known before its first word.
    """

    recall: list[str] = Field(
        max_length=3,
        description="Ids (o2, c7) whose full text is needed before answering; empty when the memory suffices.",
    )
    answer: str = Field(description="The answer, at most 3 short sentences, with [c3]-style citations.")
    citations: list[str] = Field(default_factory=list, max_length=8, description="Chunk ids used, such as c3.")


QUOTE_WORDS = 40
"""Most words of a sentence quoted as a source."""


RETRIEVED_SOURCES = 2
"""Most sources attached from the retrieved details when the model cites none."""


def cited_sources(
    sources: Sources, citations: Sequence[str], answer: str, *, cited: bool = True
) -> list[dict[str, Any]]:
    """Per cited chunk, the sentence that backs the answer best (most content words shared).

    These are what the answer's sources show. Sentences are numbered within their chunk as the chain's quotes
    are (``c3.2``, in a collection ``2:c3.2``); each source names its document by title or file name.
    ``cited``: whether the model cited these chunks (else the retriever found them, :func:`retrieved_sources`).
    """
    words = content_words(answer)
    hits = {h.chunk_id: h for h in sources.chunks(list(citations))}
    names = {m.doc_id: m.name for m in sources.members}
    out: list[dict[str, Any]] = []
    for label in citations:
        hit, found = hits.get(label), sources.locate(label)
        if hit is None or found is None:
            continue
        sentences = chunk_sentences(hit.text)
        if not sentences:
            continue
        # most words shared; on a tie a sentence over a heading (a few words), then the first
        best = max(
            range(len(sentences)),
            key=lambda i: (len(words & content_words(sentences[i])), len(sentences[i].split()) > 3, -i),
        )
        quote = " ".join(sentences[best].split())
        cut = quote.split(" ")
        if len(cut) > QUOTE_WORDS:
            quote = " ".join(cut[:QUOTE_WORDS]) + " ..."
        doc_id = found[0]
        title = names.get(doc_id) or doc_id
        page = sentence_pages(hit.text, decode_marks(hit.metadata.get("pages")), sentences)[best]
        out.append(
            {
                "doc_id": doc_id,
                "title": title,
                "chunk_id": label,
                "label": sentence_label(label, best + 1),
                "quote": quote,
                "cited": cited,
                "section": hit.section,
                **page_fields(page),
            }
        )
    return out


def retrieved_sources(sources: Sources, details: Sequence[Mapping[str, Any]], answer: str) -> list[dict[str, Any]]:
    """The sentences that support an answer citing nothing, from the chunks retrieved for its turn.

    Each detail chunk's best sentence for the answer (:func:`cited_sources`); those sharing most content
    words with the answer first (retrieval order breaks ties), those sharing none dropped unless none shares
    any (then the first retrieved), at most :data:`RETRIEVED_SOURCES`. Marked ``cited: False``: found by the
    retriever, not cited by the model.
    """
    ids = list(dict.fromkeys(str(d["chunk_id"]) for d in details if d.get("chunk_id")))
    found = cited_sources(sources, ids, answer, cited=False)
    words = content_words(answer)
    shared = [len(words & content_words(s["quote"])) for s in found]
    ranked = sorted(range(len(found)), key=lambda i: (-shared[i], i))
    kept = [found[i] for i in ranked if shared[i] > 0] or [found[i] for i in ranked[:1]]
    return kept[:RETRIEVED_SOURCES]


def citations_of(reply: AnswerReply | RecallReply, labels: Sequence[str]) -> list[str]:
    """Chunk labels the answer cites (its list and its ``[c3]`` / ``[2:c3]`` markers) that name a chunk.

    ``labels``: every chunk label of the session's documents (:meth:`Sources.labels`).
    """
    known = set(labels)
    found = [*reply.citations, *CITED.findall(reply.answer)]
    cited = [normalise_chunk_id(re.sub(r"\s+", "", str(raw))) for raw in found]
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


def retrieve(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Details for this turn: chunks over the relevance threshold and those of canvas nodes the question touches."""
    ctx = session_context(state, runtime)
    store = get_store(ctx.namespace, ctx.embedder)
    question = state["question"]
    sources = Sources(store, session_documents(state), state.get("tags"))
    canvas_refs: list[dict[str, Any]] = []
    drawn = _canvas(ctx, sources)
    if drawn is not None:
        ids = drawn.mermaid_ids()
        for node, score in touched_nodes(
            drawn, question, store.embedder, limit=ctx.canvas_nodes, min_score=ctx.canvas_min_score
        ):
            canvas_refs.append(
                {"chunk_id": node.chunk_ids[0], "score": score, "via": f"canvas:{ids[mermaid_key(node.id)]}"}
            )
    refs = select_details(
        sources,
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
    lang, question = state.get("lang", "en"), state["question"]
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
        details_text=lambda ids: full_details(sources, ids, question, ctx.detail_tokens),
        relevant=_older_relevant(ctx, state) if offloading else (),
    )
    pieces += detail_pieces(sources, state.get("details", []), question, ctx.detail_tokens, lang, recallable=can_recall)
    report: list[dict[str, Any]] = []
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
    if update["citations"]:
        update["sources"] = cited_sources(sources, update["citations"], update["answer"])
    else:  # every answer shows what backs it: what the retriever found, marked as such
        update["sources"] = retrieved_sources(sources, state.get("details", []), update["answer"])
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
