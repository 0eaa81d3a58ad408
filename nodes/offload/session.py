"""The start of a turn: ``begin`` checks it and binds the session to its document.

A refused turn goes to ``refuse``, which raises the error once its input is out of the thread; a taken
one goes on to the canvas writer (policy ``offload_canvas``, :mod:`nodes.offload.canvas_writer`) or to
``retrieve``.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.ingest import document_field, resolve_document
from nodes.offload.chat import named_document, turn_question, withdrawn
from nodes.offload.context import OffloadContext, check_context
from nodes.offload.state import OffloadState, session_context
from stores.documents import get_document, index_identity
from stores.errors import InputError
from stores.files import IngestRoot
from stores.offload import check_session
from stores.questions import check_question
from stores.text import truncate_tokens
from stores.vectorstore import get_store


def _thread_id() -> str:
    try:
        return str((get_config().get("configurable") or {}).get("thread_id") or "")
    except RuntimeError:
        return ""


def begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Check the turn; on the first turn ingest the document and bind the session to it.

    The document is named as in every workflow (:func:`nodes.ingest.resolve_document`): exactly one
    of ``doc_id``, ``path`` or ``text`` on the first turn; later turns may omit it, and what they
    give must name the bound document (and namespace). A chat client's first turn may instead name
    it in the context (``doc_id``) or in its message, as an ingested document's id or as a file
    under ``LONGDOC_INGEST_ROOT`` (:func:`nodes.offload.chat.named_document`).

    The question is the ``question`` field or a new human message (:func:`nodes.offload.chat.turn_question`).

    The session (the key of the turn's offloaded items) is the run's thread id, never a value of the input:
    the thread the server resolved for the caller, or a new id for a run without a thread.

    A refused turn (``InputError``) writes back what the session is bound to (nothing before its
    first turn), so the refused ``doc_id``, ``path``, ``text``, ``namespace``, ``goal``, question or
    human message stays out of the thread and cannot refuse a later turn; ``refuse`` then raises the error.
    """
    try:
        return _begin(state, runtime)
    except InputError as exc:
        bound = state.get("bound") or {}
        restored = {key: bound.get(key, "") for key in ("doc_id", "session", "namespace")}
        cleared = {"path": "", "text": "", "goal": "", "question": "", "messages": withdrawn(state.get("messages", []))}
        return {"refused": str(exc) or type(exc).__name__, **cleared, **restored}


def refuse(state: OffloadState) -> dict[str, Any]:
    """Raise the error ``begin`` refused the turn with (its input is already out of the thread)."""
    raise InputError(state["refused"])


def _begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    ctx = session_context(state, runtime)
    check_context(ctx)
    asked, added = turn_question(str(state.get("question") or ""), state.get("messages", []))
    question = " ".join(check_question(asked).split())
    first = not state.get("turn")
    bound = dict(state.get("bound") or {})
    values = dict(state)
    if first and document_field(values) is None:
        named = {"doc_id": ctx.doc_id} if ctx.doc_id else {}
        values.update(named or named_document(question, ctx.namespace, IngestRoot.from_env().resolve))
    if not first:
        if state.get("namespace") and state["namespace"] != ctx.namespace:
            raise InputError(
                f"this session is bound to namespace {ctx.namespace!r}; start a new session (thread) for another one"
            )
        if values.get("doc_id") == bound["doc_id"]:
            values.pop("doc_id")  # the session's own document, carried over in the thread
    doc_id = resolve_document(values, ctx, runtime.stream_writer, required=first)
    if not first:
        if doc_id and doc_id != bound["doc_id"]:
            raise InputError("a session is bound to one document; start a new session (thread) for another one")
        if ctx.policy != bound["policy"]:
            raise InputError(
                f"this session uses policy {bound['policy']!r}; start a new session (thread) for {ctx.policy!r}"
            )
        doc_id = bound["doc_id"]
    # The thread the server resolved names the session (on LangServe it is already the tenant's own:
    # surfaces.access.thread_key); a caller never chooses whose offloaded items a turn reads or writes.
    session = bound.get("session") or _thread_id() or f"s-{uuid.uuid4().hex[:12]}"
    check_session(session)
    info = get_document(ctx.namespace, doc_id)
    index = index_identity(info)
    if not first and bound.get("index", index) != index:
        raise InputError(
            f"document {doc_id!r} was indexed again with other chunk settings or another embedder since this "
            "session began, so the chunk ids its history cites name other text; start a new session (thread)"
        )
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
        "messages": added,
        "path": "",
        "text": "",
        "goal": "",
        "doc_id": doc_id,
        "namespace": ctx.namespace,
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
        "reply_id": "",
    }
    if first:
        update["history"] = []
        update["canvas"] = {}
        update["bound"] = {
            "doc_id": doc_id,
            "session": session,
            "policy": ctx.policy,
            "namespace": ctx.namespace,
            "index": index,
        }
    runtime.stream_writer(
        {"stage": "turn", "message": f"turn {update['turn']} ({ctx.policy}) on {info.title or doc_id}"}
    )
    return update


def route_begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> Literal["refuse", "canvas", "retrieve"]:
    """Refuse a turn ``begin`` refused; make the canvas once per session when the policy uses it."""
    if state.get("refused"):
        return "refuse"
    ctx = runtime.context or OffloadContext()
    return "canvas" if ctx.policy == "offload_canvas" and not state.get("canvas") else "retrieve"
