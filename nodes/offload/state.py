"""Input, output and state of an offloading session, the session's settings and its call records."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, cast

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.context import DocumentId, DocumentIds, DocumentPath, DocumentText, Namespace, WholeNamespace, described
from nodes.ingest import in_namespace
from nodes.offload.context import OffloadContext
from stores.questions import MAX_QUESTION_CHARS
from stores.usage import Usage, merge_usage, usage_totals


class ChatMessages(TypedDict, total=False):
    """The conversation as chat clients read and write it."""

    messages: Annotated[
        list[AnyMessage],
        described(
            "The conversation: a new human message is the turn (its words, and a document attached as a file "
            "content block on the first turn); each answer comes back as an AI message ending with its sources."
        ),
        add_messages,  # last: LangGraph takes a field's reducer from the end of its metadata
    ]
    """Chat transcript: each turn's question (a new human message may be the turn) and its answer, an AI message
    whose ``additional_kwargs["longdoc"]`` holds the turn, document, citations, offloaded and recalled ids."""


class OffloadRequest(ChatMessages):
    """The input less ``doc_id`` (which the state shares with the output, where it is always set)."""

    question: NotRequired[
        Annotated[
            str,
            described(
                "This turn's question or request about the document (a chat client sends a human message in "
                "messages instead).",
                example="Who manages procurement, and what supplier did they find?",
                minLength=1,
                maxLength=MAX_QUESTION_CHARS,
            ),
        ]
    ]
    path: NotRequired[DocumentPath]
    text: NotRequired[DocumentText]
    doc_ids: NotRequired[DocumentIds]
    whole_namespace: NotRequired[WholeNamespace]
    namespace: NotRequired[Namespace]
    goal: NotRequired[
        Annotated[
            str,
            described(
                "A goal to keep in mind for the whole conversation (default: inferred from the questions).",
                example="plan the field trials",
                maxLength=MAX_QUESTION_CHARS,
            ),
        ]
    ]


class OffloadInput(OffloadRequest):
    """One turn of a conversation about a document or a collection.

    The first turn names it (doc_id, text, an attached file, doc_ids or whole_namespace); later turns on the same
    thread go on about it, or name other documents in the input or attach them (a later message's words never
    rebind), which the conversation reads from then on.
    """

    doc_id: NotRequired[DocumentId]


class OffloadOutput(ChatMessages):
    """What one turn produced."""

    turn: int
    """Turn number (1-based)."""
    answer: str
    """The answer."""
    citations: list[str]
    """Chunk ids the answer cites (in a collection, ``2:c3``: chunk c3 of document 2)."""
    asked: str
    """The question the documents were read for: the turn's question, made standalone from the conversation on a
    later turn ("What supplier did they find?" -> "What supplier did Bob Chen find?"); empty when the turn only
    needed the conversation and read nothing."""
    sources: list[dict[str, Any]]
    """What the answer rests on, one per quote the reading kept and the answer cites (all of them, marked
    ``cited: false``, when it cites none): {doc_id, title, chunk_id, label (the sentence, ``c3.2``), quote (its
    words), cited}; the answer message's text ends with them as Markdown."""
    read: list[str]
    """Chunk ids the turn's reading read (wholly or in part), in first-read order (empty when it read nothing)."""
    stopped: str
    """Why the turn's reading ended (complete, budget, hop-budget or end, as in ask; failed when a worker's reply
    could not be read, and the turn answered from its memory); empty when it read nothing."""
    input_tokens: int
    """Input tokens of the answering call as the model reported them (the second one after a recall)."""
    offloaded: list[dict[str, Any]]
    """What this turn moved to the offload store: {id, kind, tokens, summary}."""
    recalled: list[dict[str, Any]]
    """What the model recalled this turn: {id, found, source, tokens}."""
    cut: list[str]
    """What the token budget removed or shortened in the last answering call."""
    details: list[dict[str, Any]]
    """Chunks the turn's quotes come from: {chunk_id, via} (via ``read``: this turn's reading; ``kept``: the
    quotes of the last reading, kept for a turn that only needed the conversation)."""
    memory: dict[str, Any]
    """Estimated tokens of each part of the last answering prompt, and its total."""
    calls: list[dict[str, Any]]
    """Every model call of this turn: {step, input, output, cached}."""
    canvas: dict[str, Any]
    """The document's canvas: {id, source, nodes, edges, error, cached} (empty without one)."""
    doc_id: str
    """The document of a one-document session (empty for a collection: see ``documents``)."""
    documents: list[dict[str, Any]]
    """The session's documents, one or several: {tag, doc_id, title, source (relative to the server's ingest
    root)}, tag 2 being the document ``2:c3`` names (a one-document session's labels carry no tag)."""
    session: str
    """Session id (offload store key): the run's thread id, as the server resolved it (never an input)."""
    policy: str
    """Memory policy of the session."""
    usage: Annotated[dict[str, Any], merge_usage]
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
    history: list[dict[str, Any]]
    """Finished turns: {turn, question, details, citations} + {offload_id, conclusion} or {answer}."""
    pinned: dict[str, Any]
    """Pinned state: {goal, facts}."""
    evidence: str
    """The quotes the last reading kept, one ``[c3.2] sentence`` line each (at most ``evidence_tokens`` of ask's
    reading): what a turn's answer is written from."""
    recall_ids: list[str]
    """Ids the model asked to recall this turn."""
    recall_round: int
    """Recall rounds used this turn (at most one)."""
    tags: dict[str, int]
    """The thread's tags: each document any of its turns read, and its tag (kept for the life of the thread)."""
    bound: dict[str, Any]
    """What the session is bound to: {doc_id, doc_ids (a collection's), session, policy, namespace, index (the
    document's index identity, or the collection's version: its history cites chunk ids of those indexes)}; set on
    the first turn, and on a turn that names other documents (the session, policy and namespace stay)."""
    refused: str
    """Why ``begin`` refused this turn's input (empty when it took it)."""
    notice: str
    """What a refused chat message is answered with in the chat (empty: the refusal is an error)."""
    reply_id: str
    """Message id of this turn's answer: the AI message streamed while the answer was written."""


def session_documents(state: Any) -> list[str]:
    """The documents of a session: its collection, else its one document."""
    return list(state.get("collection") or [state["doc_id"]])


def session_context(state: OffloadState, runtime: Runtime[OffloadContext]) -> OffloadContext:
    """The run's settings in the session's namespace: the bound one after the first turn, else the input's."""
    ctx = runtime.context or OffloadContext()
    bound = state.get("bound") or {}
    return cast(OffloadContext, in_namespace(ctx, {"namespace": bound.get("namespace") or state.get("namespace")}))


def call_record(step: str, usage: Usage, **extra: Any) -> dict[str, Any]:
    """One model call (or a few retries of it) as reported per turn."""
    return {"step": step, **usage_totals(usage), **extra}
