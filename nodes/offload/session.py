"""The start of a turn: ``begin`` checks it and binds the session to the documents it names.

A refused turn goes to ``refuse``, which raises the error once its input is out of the thread; a taken
one goes on to the canvas writer (policy ``offload_canvas``, :mod:`nodes.offload.canvas_writer`) or to
``focus`` (:mod:`nodes.offload.reading`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

from langgraph.config import get_config
from langgraph.runtime import Runtime

import prompts
from nodes.collection.resolve import (
    resolve_documents,
    run_fields,
    source_field,
    thread_tags,
)
from nodes.collection.sources import Sources
from nodes.ingest import IngestResult, in_namespace, index_for_context, read_source
from nodes.inputs import check_attachments
from nodes.offload.chat import (
    DOCUMENT_BLOCKS,
    Attachment,
    attachment,
    attachments,
    help_text,
    ingested_block,
    kept_message,
    named_document,
    notice_message,
    pending,
    turn_question,
    withdrawn,
)
from nodes.offload.context import OffloadContext, check_context
from nodes.offload.state import OffloadState, session_context, session_documents
from nodes.owners import check_current
from stores.documents import get_document
from stores.errors import Gone, InputError, raised_status
from stores.files import IngestRoot
from stores.loaders import load_text
from stores.offload import check_session
from stores.questions import check_question
from stores.status import status_progress
from stores.text import detect_language, truncate_tokens
from stores.vectorstore import get_store


def _thread_id() -> str:
    try:
        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:
        return ""


def begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Check the turn; bind the session to the documents it names (on the first turn, those it must name).

    The documents are named as in every workflow (:func:`nodes.collection.resolve.resolve_documents`):
    exactly one of ``doc_id``, ``path`` (a file or a folder), ``text``, ``doc_ids`` or ``whole_namespace``
    on the first turn. A later turn that names none goes on with the session's documents; one that names
    others rebinds the session to them: the conversation so far stays, and the turn's reading, canvas,
    retrieval and citations are the new documents' (each keeps the thread's tag it got when first read,
    :func:`nodes.collection.resolve.thread_tags`). The namespace stays the first turn's. A chat client may
    instead attach documents to the message (file or text-plain content blocks:
    :func:`nodes.offload.chat.attachments`, ingested into the session's namespace under the usual bounds;
    several make a collection), on any turn, and on the first name one in the context (``doc_id``), or in
    its words, as an ingested document's id or as a file under ``LONGDOC_INGEST_ROOT``
    (:func:`nodes.offload.chat.named_document`). A message with an attachment and no words asks for an
    overview.

    The question is the ``question`` field or a new human message (:func:`nodes.offload.chat.turn_question`).

    The session (the key of the turn's offloaded items) is the run's thread id, never a value of the input:
    the thread the server resolved for the caller, or a new id for a run without a thread.

    A refused turn (``InputError``) writes back what the session is bound to (nothing before its
    first turn), so the refused ``doc_id``, ``path``, ``text``, ``namespace``, ``goal`` or question
    stays out of the thread and cannot refuse a later turn. A turn given as a field is then an error
    (``refuse`` raises it) and its human message is withdrawn; a turn given as a chat message is answered
    in the chat instead (what to attach or name, or why the message was not taken), its message kept
    without the attachment's content, so nothing vanishes from the conversation.
    """
    try:
        return _begin(state, runtime)
    except InputError as exc:
        bound = state.get("bound") or {}
        restored = {key: bound.get(key, "") for key in ("session", "namespace")}
        restored["doc_id"] = run_fields(bound.get("doc_ids") or [bound.get("doc_id", "")])["doc_id"]
        cleared = {"path": "", "text": "", "doc_ids": [], "whole_namespace": False, "goal": "", "question": ""}
        reason = str(exc) or type(exc).__name__
        newest = pending(state.get("messages", []))
        if state.get("question") or not newest:
            return {"refused": reason, "notice": "", **cleared, **restored, "messages": withdrawn(newest)}
        lang = detect_language(newest[-1].text if isinstance(newest[-1].text, str) else "")
        if isinstance(exc, NoDocument):
            notice = help_text(exc.namespace, lang)
        else:
            notice = prompts.render("offload/refused", lang, reason=IngestRoot.from_env().scrub(reason))
        notes = exc.notes or {i: "[attachment not read]" for i, _ in attachments(newest[-1])}
        kept = [exc.kept or kept_message(newest[-1], notes)] if attachments(newest[-1]) else []
        return {"refused": reason, "notice": notice, **cleared, **restored, "messages": kept}


NO_DOCUMENT = "no document: give one of doc_id, path or text"
"""Why a first turn that names no document is refused."""


class NoDocument(InputError):
    """A first turn that names no document (a chat message is answered with what to attach or name)."""

    def __init__(self, namespace: str) -> None:
        super().__init__(NO_DOCUMENT)
        self.namespace = namespace


def refuse(state: OffloadState) -> dict[str, Any]:
    """Answer a refused chat message in the chat; raise the error of any other refused turn.

    Either way the turn's input is already out of the thread (``begin``).
    """
    notice = state.get("notice")
    if not notice:
        reason = state["refused"]
        raise (Gone if raised_status(reason) == Gone.status else InputError)(reason)
    needs = "document" if state["refused"] == NO_DOCUMENT else ""
    message = notice_message(notice, state["refused"], needs)
    return {"messages": [message], "answer": notice, "citations": [], "notice": ""}


def take_attachments(state: OffloadState, ctx: OffloadContext, writer: Any) -> tuple[list[str], dict[str, Any]]:
    """Ingest the documents the turn's newest human message carries: their ids, and the message without them.

    Refused (too big, an unreadable or unsupported file, a link): an InputError naming the file, whose
    ``notes`` say what the kept message shows in the attachment's place.
    """
    newest = pending(state.get("messages", []))
    message = newest[-1] if newest else None
    blocks = attachments(message)
    if message is None or not blocks:
        return [], {}
    check_attachments([message])
    ids: list[str] = []
    notes: dict[int, str] = {}
    for position, block in blocks:
        try:
            given = attachment(block)
            if given.doc_id:  # ingested at the server's door
                info = get_document(ctx.namespace, given.doc_id)
                result = IngestResult(doc_id=info.doc_id, chunks=info.chunks, cached=True, title=info.title)
            else:
                result = ingest_attachment(given, ctx, writer)
        except InputError as exc:
            name = _shown_name(block)
            notes[position] = f"[attached {name}: not read]"
            for other, _ in blocks:
                notes.setdefault(other, "[attachment not read]")
            exc.notes = notes
            raise
        ids.append(result.doc_id)
        notes[position] = given.note(
            f"document {result.doc_id}, {result.chunks} chunk{'' if result.chunks == 1 else 's'}"
        )
    return list(dict.fromkeys(ids)), {"messages": [kept_message(message, notes)]}


def ingest_attachment(given: Attachment, ctx: Any, writer: Any = None) -> IngestResult:
    """Read and index a document given in a chat message, in the context's namespace, under every ingest's bounds."""
    doc = (
        load_text(given.text, title=given.filename)
        if given.text
        else read_source(data=given.data, filename=given.filename)
    )
    return index_for_context(doc, ctx.namespace, ctx, writer)


def detach_uploads(values: Any, context: Any, strict: bool = False) -> Any:
    """A chat input with the documents its messages carry ingested now and referred to by id.

    Run by a server before a checkpointed run starts (as :func:`nodes.ingest.detach_text` is), so no
    checkpoint holds an upload; a file that cannot be read is left as the reason, which the turn
    answers in the chat, or with ``strict`` raises its InputError (``TooLarge`` over a size bound),
    for a door that refuses the request instead.
    """
    if not isinstance(values, Mapping) or not isinstance(values.get("messages"), list):
        return values
    check_attachments(values["messages"])
    ctx = in_namespace(context, values)
    messages = []
    for message in values["messages"]:
        content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in DOCUMENT_BLOCKS for b in content
        ):
            content = [
                ingested_block(b, lambda given: ingest_attachment(given, ctx).doc_id, strict)
                if isinstance(b, Mapping) and b.get("type") in DOCUMENT_BLOCKS
                else b
                for b in content
            ]
            message = (
                {**message, "content": content}
                if isinstance(message, Mapping)
                else message.model_copy(update={"content": content})
            )
        messages.append(message)
    return {**values, "messages": messages}


def _shown_name(block: Any) -> str:
    try:
        return attachment(block).filename
    except InputError:
        return "the attachment"


def _begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    ctx = session_context(state, runtime)
    check_context(ctx)
    attached, kept = take_attachments(state, ctx, status_progress(runtime.stream_writer))
    try:
        return _bind(state, runtime, ctx, attached, kept)
    except InputError as exc:
        if kept and exc.notes is None:  # the attachments were read: the kept message says so
            exc.notes = {}
            exc.kept = kept["messages"][0]
        raise


def _bind(
    state: OffloadState,
    runtime: Runtime[OffloadContext],
    ctx: OffloadContext,
    attached: list[str],
    kept: dict[str, Any],
) -> dict[str, Any]:
    first = not state.get("turn")
    bound = dict(state.get("bound") or {})
    values = dict(state)
    asked, added = _turn_asked(state, attached)
    own = [] if first else session_documents(state)
    if own and [values.get("doc_id")] == own:
        values.pop("doc_id")  # the last turn's document, carried over in the thread
    _name_attached(values, attached)
    if first and source_field(values) is None:
        named = {"doc_id": ctx.doc_id} if ctx.doc_id else {}
        values.update(named or named_document(asked, ctx.namespace, IngestRoot.from_env().resolve))
        if source_field(values) is None:
            raise NoDocument(ctx.namespace)
    if not first and state.get("namespace") and state["namespace"] != ctx.namespace:
        raise InputError(
            f"this session is bound to namespace {ctx.namespace!r}; start a new session (thread) for another one"
        )
    doc_ids = _turn_documents(values, runtime, ctx, own, bound)
    rebound = first or doc_ids != own
    doc_id = doc_ids[0]
    # The thread the server resolved names the session (on LangServe it is already the tenant's own:
    # surfaces.access.thread_key); a caller never chooses whose offloaded items a turn reads or writes.
    session = bound.get("session") or _thread_id() or f"s-{uuid.uuid4().hex[:12]}"
    check_session(session)
    infos = [get_document(ctx.namespace, d) for d in doc_ids]
    lang = Counter(i.language for i in infos).most_common(1)[0][0]
    question = " ".join(check_question(asked or prompts.render("offload/overview_question", lang)).split())
    store = get_store(ctx.namespace, ctx.embedder)
    tags = thread_tags(state.get("tags") or {}, doc_ids)
    sources = Sources(store, doc_ids, tags)
    index = sources.version()
    if not rebound and bound.get("index", index) != index:
        raise InputError(
            f"{sources.described()} was indexed again with other chunk settings or another embedder since this "
            "session began, so the chunk ids its history cites name other text; start a new session (thread)"
        )
    unindexed = [d for d in doc_ids if rebound and store.count(doc_id=d, kind="chunk") == 0]
    if unindexed:
        raise InputError(
            f"document {unindexed[0]!r} has no chunks in the {store.space!r} vector space; ingest it with this embedder"
        )
    pinned = dict(state.get("pinned") or {"goal": "", "facts": []})
    if state.get("goal"):
        pinned["goal"] = truncate_tokens(" ".join(str(state["goal"]).split()), 30)
    update: dict[str, Any] = {
        "question": question,
        "messages": [*kept.get("messages", []), *added],
        **run_fields(doc_ids),
        "goal": "",
        "collection": doc_ids,
        "tags": tags,
        "documents": sources.documents(),
        "namespace": ctx.namespace,
        "session": session,
        "policy": ctx.policy,
        "lang": lang,
        "chunks": sum(i.chunks for i in infos),
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
        "notice": "",
        "reply_id": "",
        "sources": [],
        "asked": "",
        "read": [],
        "stopped": "",
    }
    if first:
        update["history"] = []
    if rebound:  # the documents the session reads from this turn on: the conversation so far stays
        update["canvas"] = {}
        update["evidence"] = ""
        update["bound"] = {
            "doc_id": doc_id,
            "doc_ids": doc_ids,
            "session": session,
            "policy": ctx.policy,
            "namespace": ctx.namespace,
            "index": index,
        }
    runtime.stream_writer(
        {"stage": "turn", "message": f"turn {update['turn']} ({ctx.policy}) on {sources.described()}"}
    )
    return update


def _turn_asked(state: OffloadState, attached: list[str]) -> tuple[str, list[Any]]:
    """The turn's checked question and the messages it adds; a message that only attaches documents may ask none."""
    try:
        asked, added = turn_question(str(state.get("question") or ""), state.get("messages", []))
    except InputError:
        if not attached:
            raise
        asked, added = "", []
    if asked or not attached:
        asked = check_question(asked)
    return asked, added


def _name_attached(values: dict[str, Any], attached: list[str]) -> None:
    """Name the documents attached to the turn's message in ``values``: the documents the turn reads."""
    if attached:
        given = source_field(values)
        if given not in (None, "doc_id") or values.get("doc_id") not in (None, "", *attached):
            raise InputError("the message attaches documents and the input names others; give one or the other")
        values.pop("doc_id", None)
        values.update({"doc_id": attached[0]} if len(attached) == 1 else {"doc_ids": attached})


def _turn_documents(
    values: dict[str, Any],
    runtime: Runtime[OffloadContext],
    ctx: OffloadContext,
    own: list[str],
    bound: dict[str, Any],
) -> list[str]:
    """The documents the turn reads: those ``values`` name, else the session's own (``own``, after its first turn).

    A later turn that names documents (a ``doc_id``, a file or folder ``path``, a ``text``, ``doc_ids``,
    ``whole_namespace`` or an attachment) rebinds the session to them.
    """
    if own and ctx.policy != bound["policy"]:
        raise InputError(
            f"this session uses policy {bound['policy']!r}; start a new session (thread) for {ctx.policy!r}"
        )
    if own and source_field(values) is None:
        check_current(ctx.namespace, own)
        return own
    return resolve_documents(values, ctx, status_progress(runtime.stream_writer))


def route_begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> Literal["refuse", "canvas", "focus"]:
    """Refuse a turn ``begin`` refused; make the canvas once per session when the policy uses it."""
    if state.get("refused"):
        return "refuse"
    ctx = runtime.context or OffloadContext()
    return "canvas" if ctx.policy == "offload_canvas" and not state.get("canvas") else "focus"
