"""A session's turns as chat messages: the question a turn brings, the document a message names, the answer message.

Chat clients (LangGraph Studio's chat view, Agent Chat UI, an A2A caller) send a turn as a new
human message in ``messages``; callers of the ``question`` field keep working, and their
questions are added to ``messages`` too, so the transcript is the same whoever drives it.

A human message may carry the document itself, as content blocks: ``file`` blocks (LangChain's
standard ``{"type": "file", "base64": ..., "mime_type": ...}``, or the older ``data`` /
``source_type`` form Agent Chat UI sends) and ``text-plain`` blocks (:func:`attachments`). The answer
message ends with the sources it cites, as Markdown (:func:`render_sources`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage

from stores.documents import find_document, list_documents
from stores.errors import InputError
from stores.files import shown_source
from stores.loaders import SUPPORTED
from stores.settings import get_settings

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


def reply_text(answer: str, sources: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    """The text of an answer message: the answer, then the sources it cites (what chat clients show)."""
    rendered = render_sources(sources, lang)
    return f"{answer}\n\n{rendered}" if rendered else answer


def answer_message(state: Mapping[str, Any], offloaded: list[dict[str, Any]]) -> AIMessage:
    """The turn's answer as an AI message: the text and its sources.

    ``additional_kwargs["longdoc"]`` holds what backs it (the sources as data among it; a collection's documents
    with their tags) and the question the documents were read for (``asked``, empty for a turn that read nothing).
    """
    sources = list(state.get("sources") or [])
    documents = list(state.get("documents") or [])
    meta = {
        "turn": state.get("turn"),
        "asked": str(state.get("asked") or ""),
        "doc_id": state.get("doc_id"),
        "citations": list(state.get("citations") or []),
        "sources": sources,
        **({"documents": documents} if documents else {}),
        "details": [d.get("chunk_id") for d in state.get("details") or []],
        "offloaded": offloaded,
        "recalled": list(state.get("recalled") or []),
    }
    text = reply_text(str(state.get("answer") or ""), sources, str(state.get("lang") or "en"))
    return AIMessage(content=text, id=state.get("reply_id") or None, additional_kwargs={"longdoc": meta})


def notice_message(text: str, reason: str, needs: str = "") -> AIMessage:
    """A turn the chat could not take, answered in the chat: what to do instead, and the reason as data.

    ``needs`` names what the user can send to go on (``document``: the turn named none), empty when the
    message cannot be taken as it is (an unknown id, an unreadable file).
    """
    meta = {"refused": reason, **({"needs": needs} if needs else {})}
    return AIMessage(content=text, additional_kwargs={"longdoc": meta})


MEDIA_SUFFIXES = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/html": ".html",
    "application/xhtml+xml": ".html",
}
"""The media types of the documents a chat message may carry, and the suffix that reads each."""

DOCUMENT_BLOCKS = ("file", "text-plain", "image", "audio", "video")
"""Content block types that carry a file rather than the message's words."""


@dataclass(frozen=True)
class Attachment:
    """A document given in a chat message: its file name and its content (base64 bytes, or text)."""

    filename: str
    data: str = ""
    """The file's bytes in base64."""
    text: str = ""
    """The document as text (a ``text-plain`` block)."""
    doc_id: str = ""
    """A document ingested already, when the server's door took the file (:func:`ingested_block`)."""

    def note(self, outcome: str) -> str:
        """What the message keeps of the attachment once it is ingested or refused (never its content)."""
        return f"[attached {self.filename}: {outcome}]"


def _filename(block: Mapping[str, Any], suffix: str) -> str:
    meta = {**dict(block.get("metadata") or {}), **dict(block.get("extras") or {})}
    name = next(
        (str(v) for v in (meta.get("filename"), meta.get("name"), block.get("filename"), block.get("title")) if v), ""
    )
    name = Path(name.replace("\\", "/")).name
    stem = name or "attachment"
    return stem if Path(stem).suffix.lower() in SUPPORTED else stem + suffix


def attachment(block: Mapping[str, Any]) -> Attachment:
    """The document a content block carries; InputError naming what cannot be read (a link, an image...)."""
    kind = block.get("type")
    extras: Mapping[str, Any] = block.get("extras") or {} if isinstance(block.get("extras"), Mapping) else {}
    if extras.get("refused"):
        raise InputError(str(extras["refused"]))
    if extras.get("ingested") and isinstance(block.get("file_id"), str):
        return Attachment(_filename(block, ".txt"), doc_id=str(block["file_id"]))
    media = str(block.get("mime_type") or block.get("mimeType") or "").split(";")[0].strip().lower()
    named = _filename(block, "")
    if kind in ("image", "audio", "video") or media.startswith(("image/", "audio/", "video/")):
        raise InputError(
            f"{named or 'the attachment'}: {media or kind} files are not read; attach a PDF, DOCX, "
            "HTML, Markdown or text file"
        )
    suffix = Path(named).suffix.lower() if Path(named).suffix.lower() in SUPPORTED else MEDIA_SUFFIXES.get(media, "")
    if not suffix:
        raise InputError(
            f"{named or 'the attachment'}: unsupported type {media or '(none given)'}; attach a PDF, DOCX, HTML, "
            "Markdown or text file"
        )
    name = _filename(block, suffix)
    text = block.get("text")
    if (kind == "text-plain" or block.get("source_type") == "text") and isinstance(text, str) and text:
        return Attachment(name, text=text)
    data = block.get("base64") or block.get("data")
    if isinstance(data, str) and data:
        return Attachment(name, data=data.strip())
    if block.get("url") or block.get("file_id") or block.get("source_type") in ("url", "id"):
        raise InputError(f"{name}: files are not fetched from links or file stores; attach the file itself")
    raise InputError(f"{name}: the attachment holds no content")


def attachments(message: AnyMessage | None) -> list[tuple[int, Mapping[str, Any]]]:
    """The content blocks of ``message`` that carry a document (by position), in order."""
    content = message.content if message is not None else ""
    if not isinstance(content, list):
        return []
    return [(i, b) for i, b in enumerate(content) if isinstance(b, Mapping) and b.get("type") in DOCUMENT_BLOCKS]


def kept_message(message: AnyMessage, notes: Mapping[int, str]) -> HumanMessage:
    """``message`` (same id) with each document block replaced by its note: the thread never holds an upload."""
    content = message.content if isinstance(message.content, list) else [message.content]
    kept: list[str | dict[str, Any]] = []
    for i, block in enumerate(content):
        if i in notes:
            kept.append({"type": "text", "text": notes[i]})
        elif isinstance(block, Mapping) and block.get("type") in DOCUMENT_BLOCKS:
            kept.append({"type": "text", "text": "[attachment left out]"})
        else:
            kept.append(block if isinstance(block, str) else dict(block))
    return HumanMessage(content=kept, id=message.id)


def help_text(namespace: str, lang: str, shown: int = 8) -> str:
    """What a first message without a document is answered with: what to attach or name."""
    import prompts

    docs = sorted(list_documents(namespace), key=lambda d: (_name(d).lower(), d.ingested_at))
    names = Counter(_name(d) for d in docs)
    lines = "\n".join(
        f"- {_name(d)}{_told_apart(d) if names[_name(d)] > 1 else ''} (`{d.doc_id}`)" for d in docs[:shown]
    )
    more = f"\n- ... {len(docs) - shown} more" if len(docs) > shown else ""
    listing = "\n\n" + prompts.render("offload/documents_here", lang, documents=lines + more) if docs else ""
    size = mebibytes(get_settings().max_bytes)
    return prompts.render("offload/no_document", lang, size=size, documents=listing).strip()


def _name(doc: Any) -> str:
    """A listed document's title, else its source as outputs show it (:func:`stores.files.shown_source`)."""
    return str(doc.title or shown_source(str(doc.source or "")))


def _told_apart(doc: Any) -> str:
    """What tells a document from others of the same title: its file, size and when it was ingested."""
    source = str(doc.source or "")
    file = source.replace("\\", "/").rsplit("/", 1)[-1] if source and source != doc.title else ""
    when = str(doc.ingested_at or "")[:16].replace("T", " ")
    parts = ["given as text" if file == "text" else file, f"{doc.chunks} chunks" if doc.chunks else ""]
    parts.append(f"ingested {when} UTC" if when else "")
    return "".join(f" · {p}" for p in parts if p)


def mebibytes(size: int) -> str:
    """A byte count as the project writes sizes and limits: binary units (``200 MiB``, ``0.5 MiB``, ``512 KiB``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale / 2:
            return f"{round(size / scale, 1):g} {unit}"
    return f"{size} bytes"


def render_sources(sources: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    """The sources of an answer, as Markdown lines: the quote's label as the answer cites it, the document, the quote.

    Each line names its sentence as the answer's markers do (``[c2.1]``, in a collection ``[2:c2.1]``), so the two
    agree. Sources the model did not cite (quoted by the readers: ``cited`` false) say so in the heading.
    """
    import prompts

    if not sources:
        return ""
    retrieved = not any(s.get("cited", True) for s in sources)
    head = prompts.render("offload/sources_retrieved" if retrieved else "offload/sources", lang).strip()
    lines = [f'- [{s.get("label") or s["chunk_id"]}] {s["title"]}{where(s)}: "{s["quote"]}"' for s in sources]
    return "\n".join([head, *lines])


def where(source: Mapping[str, Any]) -> str:
    """The page a source stands on, after its document's name (``, p. 58``); empty for a document without pages."""
    return f", p. {source['page_label']}" if source.get("page_label") else ""


def ingested_block(block: Mapping[str, Any], ingest: Any, strict: bool = False) -> dict[str, Any]:
    """A document block as a server's door leaves it once ``ingest`` (an :class:`Attachment` -> doc id) took it.

    It becomes a reference to the ingested document, or the reason it was refused; never the file's content.

    ``strict``: a refused block raises its InputError instead (the door refuses the request).
    """
    try:
        given = attachment(block)
        doc_id = given.doc_id or ingest(given)
    except InputError as exc:
        if strict:
            raise
        name = _filename(block, "") or "the attachment"
        return {"type": "file", "extras": {"filename": name, "refused": str(exc)}}
    return {"type": "file", "file_id": doc_id, "extras": {"filename": given.filename, "ingested": True}}
