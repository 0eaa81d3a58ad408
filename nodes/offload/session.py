"""The start of a turn: ``begin`` checks it and binds the session to its document.

A refused turn goes to ``refuse``, which raises the error once its input is out of the thread; a taken
one goes on to the canvas writer (policy ``offload_canvas``, :mod:`nodes.offload.canvas_writer`) or to
``retrieve``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Literal

from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.collection.resolve import (
    collection_version,
    members,
    names_collection,
    resolve_documents,
    source_field,
)
from nodes.ingest import resolve_document
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

    The documents are named as in every workflow (:func:`nodes.collection.resolve.resolve_documents`):
    exactly one of ``doc_id``, ``path`` (a file or a folder), ``text``, ``doc_ids`` or ``whole_namespace``
    on the first turn; later turns may omit them, and what they give must name the bound documents (and
    namespace). A chat client's first turn may instead name
    it in the context (``doc_id``) or in its message, as an ingested document's id or as a file
    under ``LONGDOC_INGEST_ROOT`` (:func:`nodes.offload.chat.named_document`).

    The question is the ``question`` field or a new human message (:func:`nodes.offload.chat.turn_question`).

    A refused turn (``InputError``) writes back what the session is bound to (nothing before its
    first turn), so the refused ``doc_id``, ``path``, ``text``, ``namespace``, ``session``, ``goal``,
    question or human message stays out of the thread and cannot refuse a later turn; ``refuse``
    then raises the error.
    """
    try:
        return _begin(state, runtime)
    except InputError as exc:
        bound = state.get("bound") or {}
        restored = {key: bound.get(key, "") for key in ("doc_id", "session", "namespace")}
        cleared = {
            "path": "",
            "text": "",
            "doc_ids": [],
            "whole_namespace": False,
            "goal": "",
            "question": "",
            "messages": withdrawn(state.get("messages", [])),
        }
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
    if first and source_field(values) is None:
        named = {"doc_id": ctx.doc_id} if ctx.doc_id else {}
        values.update(named or named_document(question, ctx.namespace, IngestRoot.from_env().resolve))
    if not first:
        if state.get("namespace") and state["namespace"] != ctx.namespace:
            raise InputError(
                f"this session is bound to namespace {ctx.namespace!r}; start a new session (thread) for another one"
            )
        if values.get("doc_id") == bound["doc_id"]:
            values.pop("doc_id")  # the session's own document, carried over in the thread
    if first or names_collection(values):
        doc_ids = resolve_documents(values, ctx, runtime.stream_writer)
    else:
        one = resolve_document(values, ctx, runtime.stream_writer, required=False)
        doc_ids = [one] if one else []
    if not first:
        own = list(bound.get("doc_ids") or [bound["doc_id"]])
        if doc_ids and doc_ids != own:
            if len(own) == 1 and len(doc_ids) == 1:
                raise InputError("a session is bound to one document; start a new session (thread) for another one")
            raise InputError("a session is bound to its documents; start a new session (thread) for other ones")
        if ctx.policy != bound["policy"]:
            raise InputError(
                f"this session uses policy {bound['policy']!r}; start a new session (thread) for {ctx.policy!r}"
            )
        if state.get("session") and state["session"] != bound["session"]:
            raise InputError(f"this thread belongs to session {bound['session']!r}, not {state['session']!r}")
        doc_ids = own
    doc_id = doc_ids[0]
    session = bound.get("session") or state.get("session") or _thread_id() or f"s-{uuid.uuid4().hex[:12]}"
    check_session(session)
    infos = [get_document(ctx.namespace, d) for d in doc_ids]
    info = infos[0]
    index = index_identity(info) if len(doc_ids) == 1 else collection_version(ctx.namespace, doc_ids)
    if not first and bound.get("index", index) != index:
        what = f"document {doc_id!r} was" if len(doc_ids) == 1 else "a document of this session was"
        raise InputError(
            f"{what} indexed again with other chunk settings or another embedder since this "
            "session began, so the chunk ids its history cites name other text; start a new session (thread)"
        )
    store = get_store(ctx.namespace, ctx.embedder)
    if first and len(doc_ids) == 1 and store.count(doc_id=doc_id, kind="chunk") == 0:
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
        "doc_ids": [],
        "whole_namespace": False,
        "goal": "",
        "doc_id": doc_id,
        "collection": doc_ids,
        "documents": [] if len(doc_ids) == 1 else [m.to_dict() for m in members(ctx.namespace, doc_ids)],
        "namespace": ctx.namespace,
        "session": session,
        "policy": ctx.policy,
        "lang": Counter(i.language for i in infos).most_common(1)[0][0],
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
        "reply_id": "",
    }
    if first:
        update["history"] = []
        update["canvas"] = {}
        update["bound"] = {
            "doc_id": doc_id,
            **({"doc_ids": doc_ids} if len(doc_ids) > 1 else {}),
            "session": session,
            "policy": ctx.policy,
            "namespace": ctx.namespace,
            "index": index,
        }
    what = info.title or doc_id if len(doc_ids) == 1 else f"{len(doc_ids)} documents"
    runtime.stream_writer({"stage": "turn", "message": f"turn {update['turn']} ({ctx.policy}) on {what}"})
    return update


def route_begin(state: OffloadState, runtime: Runtime[OffloadContext]) -> Literal["refuse", "canvas", "retrieve"]:
    """Refuse a turn ``begin`` refused; make the canvas once per session when the policy uses it."""
    if state.get("refused"):
        return "refuse"
    ctx = runtime.context or OffloadContext()
    return "canvas" if ctx.policy == "offload_canvas" and not state.get("canvas") else "retrieve"
