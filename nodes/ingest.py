"""Ingestion: read a document, chunk it by structure, embed the chunks into the shared store.

Idempotent by content hash: a document already indexed with the same embedder and chunking
is not embedded again and keeps its id. Nothing is written before the input is validated, so a
bad input leaves the store as it was. A source is read, parsed and hashed once per ingest.

Every workflow names its document the same way (:func:`resolve_document`): exactly one of
``doc_id`` (already ingested), ``path`` or ``text`` (ingested first, idempotently), in the
input's ``namespace`` (default: the context's). None, or more than one, is an ``InputError``
that names the fields given.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nodes.owners import record_upload
from stores.chunking import Chunk, chunk_text, effective_overlap
from stores.documents import (
    DocumentInfo,
    count_words,
    document_lock,
    find_document,
    get_document,
    index_identity,
    now_iso,
    save_document,
)
from stores.errors import InputError, TooLarge
from stores.loaders import LoadedDocument, load_bytes, load_path, load_text, max_bytes
from stores.pages import Mark, chunk_marks, encode_marks
from stores.questions import MAX_QUESTION_CHARS
from stores.text import content_hash, detect_language
from stores.vectorstore import (
    Record,
    VectorStore,
    check_namespace,
    chunk_record_id,
    drop_indexes,
    get_store,
    namespace_collections,
)

Progress = Callable[[dict[str, Any]], None]
EMBED_BATCH = 16
"""Chunks embedded and stored per step (the unit a killed build resumes from)."""
DOCUMENT_FIELDS = ("doc_id", "path", "text")
"""The input fields that name a workflow's document; exactly one is given."""


@dataclass(frozen=True)
class IngestResult:
    """What ingestion produced."""

    doc_id: str
    chunks: int
    cached: bool
    title: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {"doc_id": self.doc_id, "chunks": self.chunks, "cached": self.cached, "title": self.title}


def read_source(
    path: str | None = None,
    text: str | None = None,
    title: str = "",
    data: str | None = None,
    filename: str = "",
    encoding: str | None = None,
) -> LoadedDocument:
    """Load a document from a path, raw text or a file's base64 bytes (exactly one of them).

    ``encoding`` names the encoding of a text or html file (default: UTF-8, or a confident guess).
    """
    if sum(bool(x) for x in (path, text, data)) > 1:
        raise InputError("give one of path, text or data, not several")
    if data:
        if not filename:
            raise InputError("data needs a filename whose suffix gives the type (e.g. report.pdf)")
        size = len(data) * 3 // 4  # what the base64 decodes to, give or take its padding: checked before decoding
        if size > max_bytes() + 2:
            raise TooLarge(
                f"{Path(filename).name}: {size} bytes is over the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)"
            )
        try:
            # binascii reads an ASCII str in place (base64.b64decode would copy it to bytes first)
            raw = binascii.a2b_base64(data, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise InputError(f"data is not valid base64 ({exc})") from exc
        doc = load_bytes(raw, Path(filename).name, encoding=encoding)
        return replace(doc, title=title or doc.title)
    if path:
        doc = load_path(path, encoding)
        return replace(doc, title=title or doc.title)
    if text is not None:
        return load_text(text, title=title)
    raise InputError("nothing to ingest: give a path or text")


def is_indexed(store: VectorStore, doc_id: str, chunk_size: int, chunk_overlap: int) -> DocumentInfo | None:
    """The document's info when its published index in ``store`` has these chunk settings and is whole."""
    chunk_overlap = effective_overlap(chunk_size, chunk_overlap)
    info = find_document(store.namespace, doc_id)
    if info is None:
        return None
    if (info.embedder, info.chunk_size, info.chunk_overlap) != (store.space, chunk_size, chunk_overlap):
        return None
    if store.count(doc_id=doc_id, kind="chunk", index=index_identity(info)) != info.chunks:
        return None
    return info


def chunk_records(doc_id: str, chunks: list[Chunk], index: str, marks: Sequence[Sequence[Mark]] = ()) -> list[Record]:
    """Store records of ``chunks``, built under ``index``; ``marks``: where each chunk's pages start (a PDF's)."""
    pages = [encode_marks(m) if m else "" for m in marks] or [""] * len(chunks)
    return [
        Record(
            id=chunk_record_id(doc_id, index, c.chunk_id),
            text=c.text,
            kind="chunk",
            doc_id=doc_id,
            chunk_id=c.chunk_id,
            position=c.position,
            section=c.section,
            extra={"index": index, **({"pages": shown} if shown else {})},
        )
        for c, shown in zip(chunks, pages, strict=True)
    ]


EMBED_BATCH = 16
"""Chunks per embedding call: enough windows for the encoder to batch by length, small enough
for a steady progress bar."""


def embed_records(
    store: VectorStore,
    records: list[Record],
    *,
    progress: Progress | None = None,
    done: int = 0,
    total: int | None = None,
) -> int:
    """Embed ``records`` and write them to ``store``, writing one batch while the next is embedded.

    ``done`` of ``total`` chunks were stored before (what the progress events count). Returns how
    many records were embedded.
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    emit = progress or (lambda _event: None)
    total = done + len(records) if total is None else total
    emit({"stage": "embed", "done": done, "total": total})
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chroma-writer") as writer:
        pending: Future[int] | None = None
        for start in range(0, len(records), EMBED_BATCH):
            batch = records[start : start + EMBED_BATCH]
            vectors = store.embedder.embed_documents([r.text for r in batch])
            if pending is not None:
                pending.result()
            pending = writer.submit(store.add, batch, vectors)
            done += len(batch)
            emit({"stage": "embed", "done": done, "total": total})
        if pending is not None:
            pending.result()
    return len(records)


def index_document(
    doc: LoadedDocument,
    store: VectorStore,
    *,
    chunk_size: int = 900,
    chunk_overlap: int = 150,
    progress: Progress | None = None,
    record: bool = True,
) -> IngestResult:
    """Chunk and embed ``doc`` into ``store`` unless it is already there; returns its id.

    Whole or not at all: the chunks are written under the new index's identity, invisible to
    readers, and the document's record switches to it in one atomic write once every chunk is
    stored; then the chunks of other indexes are deleted. A build that died half-way is resumed
    by the next ingest with its settings (only the missing chunks are embedded) and deleted by
    one with other settings. Ingests of one document run one at a time
    (:func:`~stores.documents.document_lock`). ``record=False`` indexes the chunks only (a second
    embedder's copy of the published index), leaving the document's record as it is.
    """
    emit = progress or (lambda _event: None)
    chunk_overlap = effective_overlap(chunk_size, chunk_overlap)
    doc_id = content_hash(doc.text)
    with document_lock(store.namespace, doc_id):
        existing = is_indexed(store, doc_id, chunk_size, chunk_overlap)
        emit({"stage": "loaded", "doc_id": doc_id, "title": doc.title, "cached": existing is not None})
        if existing is not None:
            store.drop_indexes(doc_id, keep=[index_identity(existing)])
            emit({"stage": "cached", "doc_id": doc_id, "chunks": existing.chunks})
            return IngestResult(doc_id=doc_id, chunks=existing.chunks, cached=True, title=existing.title)
        chunks = chunk_text(doc.text, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        if not chunks:
            raise InputError(f"{doc.source}: the document has no text to index")
        emit({"stage": "chunked", "doc_id": doc_id, "chunks": len(chunks)})
        sections: list[str] = []
        for c in chunks:
            if c.section and c.section not in sections:
                sections.append(c.section)
        info = DocumentInfo(
            doc_id=doc_id,
            namespace=store.namespace,
            title=doc.title,
            source=doc.source,
            media_type=doc.media_type,
            language=detect_language(doc.text),
            chunks=len(chunks),
            sections=sections,
            embedder=store.space,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            words=count_words(doc.text),
        )
        published = find_document(store.namespace, doc_id)
        index = index_identity(info if record or published is None else published)
        store.drop_indexes(doc_id, keep=[index, index_identity(published) if published is not None else ""])
        present = store.chunk_ids(doc_id, index)
        marks = chunk_marks(doc.text, doc.pages, [c.text for c in chunks])
        records = [r for r in chunk_records(doc_id, chunks, index, marks) if r.id not in present]
        embed_records(store, records, progress=emit, done=len(present), total=len(chunks))
        if store.count(doc_id=doc_id, kind="chunk", index=index) != len(chunks):
            raise RuntimeError(f"the index of {doc_id!r} is incomplete after writing it; ingest it again")
        if record:
            info = replace(info, ingested_at=now_iso())
            save_document(info, doc.text)  # the switch: readers see the new index from here on
            drop_other_indexes(store.namespace, doc_id, index)
        emit({"stage": "indexed", "doc_id": doc_id, "chunks": len(chunks)})
    return IngestResult(doc_id=doc_id, chunks=len(chunks), cached=False, title=doc.title)


def index_state(namespace: str, doc_id: str, embedder: str | None = None) -> dict[str, Any]:
    """How a document's index stands: chunks its record counts, chunks readers see, chunk records stored.

    ``whole`` when readers see exactly the recorded chunks; ``clean`` when nothing else is stored
    (no build under way, dead or replaced).
    """
    store = get_store(namespace, embedder)
    info = find_document(namespace, doc_id)
    stored = len(store.collection.get(where={"$and": [{"doc_id": doc_id}, {"kind": "chunk"}]}, include=[])["ids"])
    recorded = info.chunks if info is not None else 0
    visible = store.count(doc_id=doc_id, kind="chunk")
    return {
        "chunk_size": info.chunk_size if info is not None else 0,
        "recorded": recorded,
        "visible": visible,
        "stored": stored,
        "whole": info is not None and recorded == visible,
        "clean": info is not None and recorded == visible == stored,
    }


def drop_other_indexes(namespace: str, doc_id: str, index: str) -> None:
    """Delete ``doc_id``'s chunks of every index but ``index``, in every embedder's collection of ``namespace``."""
    for collection in namespace_collections(namespace):
        drop_indexes(collection, doc_id, keep=[index])


def ingest(
    path: str | None = None,
    text: str | None = None,
    *,
    namespace: str = "default",
    title: str = "",
    embedder: str | None = None,
    chunk_size: int = 900,
    chunk_overlap: int = 150,
    progress: Progress | None = None,
    encoding: str | None = None,
) -> IngestResult:
    """Read, chunk and index a document (a no-op returning the same id when already indexed)."""
    doc = read_source(path, text, title, encoding=encoding)
    store = get_store(namespace, embedder)
    return index_document(doc, store, chunk_size=chunk_size, chunk_overlap=chunk_overlap, progress=progress)


def index_for_context(
    doc: LoadedDocument, namespace: str, context: Any, progress: Progress | None = None
) -> IngestResult:
    """Index uploaded ``doc`` into ``namespace`` with a run context's embedder and chunking; the upload owns it."""
    store = get_store(namespace, context.embedder)
    done = index_document(
        doc, store, chunk_size=context.chunk_size, chunk_overlap=context.chunk_overlap, progress=progress
    )
    record_upload(store, done.doc_id)
    return done


def input_namespace(values: Mapping[str, Any], context: Any) -> str:
    """The namespace a workflow's input asks for (default: the context's), checked."""
    return check_namespace(str(values.get("namespace") or context.namespace))


def in_namespace(context: Any, values: Mapping[str, Any]) -> Any:
    """``context`` with the namespace the state (or input) names; a node's stores then follow it."""
    namespace = input_namespace(values, context)
    return context if namespace == context.namespace else replace(context, namespace=namespace)


def document_field(values: Mapping[str, Any]) -> str | None:
    """Which of ``doc_id``, ``path``, ``text`` names the document (None: none does); several is an InputError."""
    given = [name for name in DOCUMENT_FIELDS if values.get(name)]
    if len(given) > 1:
        raise InputError(f"give exactly one of doc_id, path or text to name the document, not {' and '.join(given)}")
    return given[0] if given else None


def resolve_document(
    values: Mapping[str, Any], context: Any, progress: Progress | None = None, *, required: bool = True
) -> str:
    """The id of the document a workflow's input names, ingesting a ``path`` or ``text`` first.

    Exactly one of ``doc_id``, ``path``, ``text``; ``doc_id`` must be ingested in the input's
    namespace. With ``required=False`` (a later turn of a bound session) none gives ``""``.
    """
    namespace = input_namespace(values, context)
    name = document_field(values)
    if name is None:
        if required:
            raise InputError("no document: give one of doc_id, path or text")
        return ""
    if name == "doc_id":
        doc_id = str(values["doc_id"])
        get_document(namespace, doc_id)
        return doc_id
    doc = read_source(path=values.get("path"), text=values.get("text"))
    return index_for_context(doc, namespace, context, progress).doc_id


QUESTION_FIELDS = ("question", "query")
"""Input fields holding a question (at most :data:`~stores.questions.MAX_QUESTION_CHARS` characters)."""


MAX_REQUESTS = 100
"""Requests one route input may carry (``requests``): each returns its agents and tools."""

MAX_MESSAGES = 100
"""Messages one chat input may carry (a chat client sends the turn's new message)."""

MAX_TITLE_CHARS = 500
"""Longest title an ingest input may give its document."""

MAX_K = 50
"""Most agents a route input may ask for (``k``)."""


def check_input_sizes(values: Any) -> None:
    """InputError when a field of a workflow's input is over its limit (checked before any run starts).

    The fields: a question (:data:`~stores.settings.MAX_QUESTION_CHARS`), the number of route requests, chat
    messages, ``k``, a title.
    """
    if not isinstance(values, Mapping):
        return
    for name in QUESTION_FIELDS:
        value = values.get(name)
        if isinstance(value, str) and len(value) > MAX_QUESTION_CHARS:
            raise InputError(f"the {name} is {len(value)} characters long; the limit is {MAX_QUESTION_CHARS}")
    requests = values.get("requests")
    if isinstance(requests, list) and len(requests) > MAX_REQUESTS:
        raise InputError(f"a route input may carry at most {MAX_REQUESTS} requests, got {len(requests)}")
    if isinstance(requests, list) and any(isinstance(r, str) and len(r) > MAX_QUESTION_CHARS for r in requests):
        raise InputError(f"a request is over {MAX_QUESTION_CHARS} characters long")
    messages = values.get("messages")
    if isinstance(messages, list) and len(messages) > MAX_MESSAGES:
        raise InputError(f"a chat input may carry at most {MAX_MESSAGES} messages, got {len(messages)}")
    k = values.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K):
        raise InputError(f"k must be a number from 1 to {MAX_K}")
    title = values.get("title")
    if isinstance(title, str) and len(title) > MAX_TITLE_CHARS:
        raise InputError(f"the title is {len(title)} characters long; the limit is {MAX_TITLE_CHARS}")


def detach_text(values: Any, context: Any, progress: Progress | None = None) -> Any:
    """A workflow's input with its document ``text`` ingested now and named by ``doc_id`` instead.

    Run before a checkpointed graph starts, so the text never sits in a checkpoint (the first one
    holds the input); any other input is returned as it is.
    """
    if not isinstance(values, Mapping) or document_field(values) != "text":
        return values
    doc = read_source(text=values.get("text"))
    doc_id = index_for_context(doc, input_namespace(values, context), context, progress).doc_id
    return {**{k: v for k, v in values.items() if k != "text"}, "doc_id": doc_id}
