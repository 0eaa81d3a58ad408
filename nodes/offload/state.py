"""Input, output and state of an offloading session, the session's settings and its call records."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.ingest import in_namespace
from nodes.offload.context import OffloadContext
from stores.usage import Usage, merge_usage, usage_totals


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
    """First turn: a file to ingest and talk about, or a folder: its new files are ingested and the session talks
    about all of its documents."""
    text: NotRequired[str]
    """First turn: raw text to ingest and talk about (cleared from the thread once ingested)."""
    doc_ids: NotRequired[list[str]]
    """First turn: ids of documents ingested in the namespace, talked about as one collection (answers cite
    ``2:c3``, chunk c3 of document 2; ``documents`` maps the tags)."""
    whole_namespace: NotRequired[bool]
    """First turn: true to talk about every document of the namespace as one collection."""
    namespace: NotRequired[str]
    """Namespace of the documents and the offload store (default: the context's); fixed for the session."""
    goal: NotRequired[str]
    """A goal to pin for the whole session (default: the offloader infers one)."""


class OffloadInput(OffloadRequest):
    """One turn of a session."""

    doc_id: NotRequired[str]
    """First turn: id of an ingested document; give exactly one of doc_id, path, text, doc_ids or whole_namespace.
    Later turns may omit it or name the same document."""
    session: NotRequired[str]
    """Session id for the offload store (default: the thread id)."""


class OffloadOutput(ChatMessages):
    """What one turn produced."""

    turn: int
    """Turn number (1-based)."""
    answer: str
    """The answer."""
    citations: list[str]
    """Chunk ids the answer cites (in a collection, ``2:c3``: chunk c3 of document 2)."""
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
    """The document of the session (of a collection: its first)."""
    documents: list[dict]
    """A collection session's documents: {tag, doc_id, title, source}, tag 2 being the document ``2:c3`` names
    (empty for one document)."""
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
    collection: list[str]
    """The session's documents (one id for a one-document session); the input's doc_ids, whole_namespace and
    folder path are cleared once resolved."""
    history: list[dict]
    """Finished turns: {turn, question, details, citations} + {offload_id, conclusion} or {answer}."""
    pinned: dict
    """Pinned state: {goal, facts}."""
    recall_ids: list[str]
    """Ids the model asked to recall this turn."""
    recall_round: int
    """Recall rounds used this turn (at most one)."""
    bound: dict
    """What the session is bound to on its first turn: {doc_id, doc_ids (a collection's), session, policy,
    namespace, index (the document's index identity, or the collection's version: its history cites chunk ids of
    those indexes)}."""
    refused: str
    """Why ``begin`` refused this turn's input (empty when it took it)."""
    reply_id: str
    """Message id of this turn's answer: the AI message streamed while the answer was written."""


def session_documents(state: Any) -> list[str]:
    """The documents of a session: its collection, else its one document."""
    return list(state.get("collection") or [state["doc_id"]])


def session_context(state: OffloadState, runtime: Runtime[OffloadContext]) -> OffloadContext:
    """The run's settings in the session's namespace: the bound one after the first turn, else the input's."""
    ctx = runtime.context or OffloadContext()
    bound = state.get("bound") or {}
    return in_namespace(ctx, {"namespace": bound.get("namespace") or state.get("namespace")})


def call_record(step: str, usage: Usage, **extra: Any) -> dict[str, Any]:
    """One model call (or a few retries of it) as reported per turn."""
    return {"step": step, **usage_totals(usage), **extra}
