"""A session's turns as chat messages: the question a turn brings, the document a message names, the answer message.

Chat clients (LangGraph Studio's chat view, Agent Chat UI, an A2A caller) send a turn as a new
human message in ``messages``; callers of the ``question`` field keep working, and their
questions are added to ``messages`` too, so the transcript is the same whoever drives it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage

from nodes.collection.sources import cited_documents
from stores.documents import find_document
from stores.errors import InputError
from stores.loaders import SUPPORTED

DOC_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])")
"""A document id (16 hex digits of its content hash) written in a message."""

PATH = re.compile(r"[\w./~-]+(?:" + "|".join(re.escape(s) for s in SUPPORTED) + r")\b", re.IGNORECASE)
"""A file name with a supported suffix written in a message."""


def _text(message: AnyMessage) -> str:
    return " ".join(message.text.split()) if isinstance(message.text, str) else ""


def pending(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The human messages after the last AI message: what the caller added since the last answer."""
    tail: list[AnyMessage] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        tail.append(message)
    return [m for m in reversed(tail) if isinstance(m, HumanMessage)]


def turn_question(question: str, messages: Sequence[AnyMessage]) -> tuple[str, list[AnyMessage]]:
    """This turn's question, and the human message to add for it (none when ``messages`` already holds it).

    ``question`` (the field) wins; else the newest human message after the last answer is the turn.
    Neither: an InputError.
    """
    new = pending(messages)
    if question:
        same = bool(new) and _text(new[-1]) == " ".join(question.split())
        return question, [] if same else [HumanMessage(content=question)]
    if new and _text(new[-1]):
        return _text(new[-1]), []
    raise InputError("no question: send it as a new human message in messages, or as question")


def withdrawn(messages: Sequence[AnyMessage]) -> list[RemoveMessage]:
    """Removals of the human messages a refused turn brought, so they do not become a later turn's question."""
    return [RemoveMessage(id=str(m.id)) for m in pending(messages) if m.id]


def named_document(text: str, namespace: str, resolve_file: Any) -> dict[str, str]:
    """The document a first message names: ``{"doc_id": ...}``, ``{"path": ...}`` or ``{}`` (none named).

    A 16-hex-digit id counts when it names a document ingested in ``namespace``; a file name with a
    supported suffix counts when ``resolve_file`` (the server's ingest-root rule) accepts it. More
    than one document named is an InputError.
    """
    ids = {i for i in DOC_ID.findall(text) if find_document(namespace, i) is not None}
    paths: set[str] = set()
    for candidate in PATH.findall(text):
        try:
            paths.add(resolve_file(candidate.strip(".,;:")))
        except InputError:
            continue
    found = [{"doc_id": i} for i in sorted(ids)] + [{"path": p} for p in sorted(paths)]
    if len(found) > 1:
        names = ", ".join(next(iter(f.values())) for f in found)
        raise InputError(f"the message names several documents ({names}); name one, or give doc_id")
    return found[0] if found else {}


def answer_message(state: Mapping[str, Any], offloaded: list[dict[str, Any]]) -> AIMessage:
    """The turn's answer as an AI message: the text, and in ``additional_kwargs["longdoc"]`` what backs it."""
    citations = list(state.get("citations") or [])
    documents = list(state.get("documents") or [])
    meta = {
        "turn": state.get("turn"),
        "doc_id": state.get("doc_id"),
        "citations": citations,
        **({"sources": cited_documents(citations, documents)} if documents else {}),
        "details": [d.get("chunk_id") for d in state.get("details") or []],
        "offloaded": offloaded,
        "recalled": list(state.get("recalled") or []),
    }
    return AIMessage(
        content=str(state.get("answer") or ""), id=state.get("reply_id") or None, additional_kwargs={"longdoc": meta}
    )
