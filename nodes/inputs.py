"""The checks of a workflow's input that need no store, run at every surface's door.

Each surface (the LangServe app, the command line, the Aegra guard) runs :func:`check_workflow_input` before a
document's text is ingested, a thread is claimed or a checkpoint is written: an input refused here leaves nothing
behind. The graphs keep their own checks (a Python caller may run them directly); these are the same rules,
moved ahead of anything that stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.ingest import check_input_sizes
from stores.errors import InputError, TooLarge
from stores.questions import check_question
from stores.settings import get_settings

ASK, CHAT = frozenset({"ask", "chain"}), frozenset({"chat", "offload"})
"""A workflow's names (its former graph id too)."""

MAX_DOC_IDS = 10_000
"""Most ids one ``doc_ids`` may list (repeats counted: the list is what a checkpoint keeps)."""

MAX_DOC_ID_CHARS = 64
"""Longest id ``doc_ids`` or ``doc_id`` may give (an id is 16 hex digits)."""


def check_workflow_input(workflow: str, values: Any) -> None:
    """InputError when ``workflow``'s input ``values`` is refused by a check that reads no store.

    The sizes of :func:`nodes.ingest.check_input_sizes` and of ``doc_ids``, then the workflow's own: ask's
    question; chat's question or messages; summarize's length, format, language, method and query; route's
    request(s).
    """
    check_input_sizes(values)
    if not isinstance(values, Mapping):
        return
    _check_doc_ids(values)
    if workflow in ASK:
        check_question(values.get("question") or "")
    elif workflow in CHAT:
        _check_chat(values)
    elif workflow == "summarize":
        _check_summary(values)
    elif workflow == "route":
        _check_route(values)


def _check_doc_ids(values: Mapping[str, Any]) -> None:
    """InputError for a ``doc_ids`` that is no list of strings or is too long, or a document id over its length."""
    doc_ids = values.get("doc_ids")
    if doc_ids is not None:
        if not isinstance(doc_ids, list) or not all(isinstance(d, str) for d in doc_ids):
            raise InputError("doc_ids takes a list of document ids")
        if len(doc_ids) > MAX_DOC_IDS:
            raise InputError(f"doc_ids may list at most {MAX_DOC_IDS} documents, got {len(doc_ids)}")
    ids = [*(doc_ids or []), values.get("doc_id")]
    if any(isinstance(d, str) and len(d) > MAX_DOC_ID_CHARS for d in ids):
        raise InputError(f"a document id is at most {MAX_DOC_ID_CHARS} characters (ingest returns 16 hex digits)")


def _check_chat(values: Mapping[str, Any]) -> None:
    """A chat turn's question (when given) and messages: messages LangChain reads, one of them the question."""
    from langchain_core.messages import HumanMessage, convert_to_messages

    question = values.get("question")
    if question not in (None, ""):
        check_question(question)
    messages = values.get("messages")
    check_attachments(messages)
    if messages is None:
        if not question:
            raise InputError("no question: send it as a new human message in messages, or as question")
        return
    try:
        read = convert_to_messages(messages)
    except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
        raise InputError(f"messages: not chat messages ({str(exc).splitlines()[0][:200]})") from None
    if not question and not any(isinstance(m, HumanMessage) and m.text.strip() for m in read):
        raise InputError("no question: send it as a new human message in messages, or as question")


def check_attachments(messages: Any) -> None:
    """TooLarge when one of chat ``messages`` attaches more documents, or more bytes of them, than a message may.

    ``LONGDOC_MAX_ATTACHMENTS`` documents and ``LONGDOC_MAX_ATTACHMENT_BYTES`` bytes as sent (base64, or a
    ``text-plain`` block's text) per message: counted before any is read, so a refused message ingests nothing.
    """
    from nodes.offload.chat import DOCUMENT_BLOCKS

    settings = get_settings()
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
        blocks = (
            [b for b in content if isinstance(b, Mapping) and b.get("type") in DOCUMENT_BLOCKS]
            if isinstance(content, list)
            else []
        )
        if len(blocks) > settings.max_attachments:
            raise TooLarge(
                f"a chat message may attach at most {settings.max_attachments} documents (LONGDOC_MAX_ATTACHMENTS); "
                f"this one attaches {len(blocks)}"
            )
        size = sum(_attached_bytes(b) for b in blocks)
        if size > settings.max_attachment_bytes:
            raise TooLarge(
                f"the documents attached to a chat message may hold {settings.max_attachment_bytes} bytes in all "
                f"(LONGDOC_MAX_ATTACHMENT_BYTES); this one attaches {size}"
            )


def _attached_bytes(block: Mapping[str, Any]) -> int:
    """The bytes a document block carries as sent: its base64 data and its text."""
    return sum(len(v.encode("utf-8")) for k in ("base64", "data", "text") if isinstance(v := block.get(k), str))


def _check_summary(values: Mapping[str, Any]) -> None:
    """A summary's length, format, language and method (each as the graph's ``prepare`` reads them) and query."""
    from nodes.summarize.context import DEFAULT_LENGTH
    from nodes.summarize.editing import check_request

    length = values.get("length")
    check_request(
        DEFAULT_LENGTH if length is None else length,
        values.get("format") or "paragraphs",
        values.get("language") or "",
        values.get("method") or "expert-editor",
    )
    if values.get("query"):
        check_question(values["query"], "query")


def _check_route(values: Mapping[str, Any]) -> None:
    """A route input's request or requests (one of them, none empty)."""
    from nodes.route.entry import check_requests

    if values.get("request") is not None and values.get("requests") is not None:
        raise InputError("give either request or requests, not both")
    check_requests(values["requests"] if values.get("requests") is not None else [values.get("request") or ""])
