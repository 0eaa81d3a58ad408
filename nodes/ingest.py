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

import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stores.chunking import Chunk, chunk_text, effective_overlap
from stores.documents import DocumentInfo, find_document, get_document, save_document
from stores.loaders import LoadedDocument, load_bytes, load_path, load_text
from stores.settings import InputError
from stores.text import content_hash, detect_language
from stores.vectorstore import Record, VectorStore, check_namespace, get_store

Progress = Callable[[dict[str, Any]], None]
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
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InputError(f"data is not valid base64 ({exc})") from exc
        doc = load_bytes(raw, Path(filename).name, encoding=encoding)
        return LoadedDocument(text=doc.text, title=title or doc.title, source=doc.source, media_type=doc.media_type)
    if path:
        doc = load_path(path, encoding)
        return LoadedDocument(text=doc.text, title=title or doc.title, source=doc.source, media_type=doc.media_type)
    if text is not None:
        return load_text(text, title=title)
    raise InputError("nothing to ingest: give a path or text")


def is_indexed(store: VectorStore, doc_id: str, chunk_size: int, chunk_overlap: int) -> DocumentInfo | None:
    """The document's info when it is fully indexed in ``store`` with these chunk settings."""
    chunk_overlap = effective_overlap(chunk_size, chunk_overlap)
    info = find_document(store.namespace, doc_id)
    if info is None:
        return None
    if (info.embedder, info.chunk_size, info.chunk_overlap) != (store.space, chunk_size, chunk_overlap):
        return None
    if store.count(doc_id=doc_id, kind="chunk") != info.chunks:
        return None
    return info


def chunk_records(doc_id: str, chunks: list[Chunk]) -> list[Record]:
    """Store records of ``chunks``."""
    return [
        Record(
            id=f"{doc_id}:{c.chunk_id}",
            text=c.text,
            kind="chunk",
            doc_id=doc_id,
            chunk_id=c.chunk_id,
            position=c.position,
            section=c.section,
        )
        for c in chunks
    ]


EMBED_BATCH = 16
"""Chunks per embedding call: enough windows for the encoder to batch by length, small enough
for a steady progress bar."""


def embed_records(store: VectorStore, records: list[Record], *, progress: Progress | None = None) -> int:
    """Embed ``records`` and write them to ``store``, writing one batch while the next is embedded.

    Records already stored with the same id and text keep their vectors (an ingest that was cut
    short resumes where it stopped); the document's other stored chunks are deleted. Returns how
    many records were embedded.
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    emit = progress or (lambda _event: None)
    stored = {hit.id: hit.text for doc_id in {r.doc_id for r in records} for hit in store.by_doc(doc_id)}
    wanted = {r.id for r in records}
    store.delete([rid for rid in stored if rid not in wanted])
    kept = {r.id for r in records if stored.get(r.id) == r.text}
    todo = [r for r in records if r.id not in kept]
    done = len(records) - len(todo)
    emit({"stage": "embed", "done": done, "total": len(records)})
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chroma-writer") as writer:
        pending: Future[int] | None = None
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            vectors = store.embedder.embed_documents([r.text for r in batch])
            if pending is not None:
                pending.result()
            pending = writer.submit(store.add, batch, vectors)
            done += len(batch)
            emit({"stage": "embed", "done": done, "total": len(records)})
        if pending is not None:
            pending.result()
    return len(todo)


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

    ``record=False`` indexes the chunks only (a second embedder's copy of a document that is
    already recorded), leaving the document's metadata as it is.
    """
    emit = progress or (lambda _event: None)
    chunk_overlap = effective_overlap(chunk_size, chunk_overlap)
    doc_id = content_hash(doc.text)
    existing = is_indexed(store, doc_id, chunk_size, chunk_overlap)
    emit({"stage": "loaded", "doc_id": doc_id, "title": doc.title, "cached": existing is not None})
    if existing is not None:
        emit({"stage": "cached", "doc_id": doc_id, "chunks": existing.chunks})
        return IngestResult(doc_id=doc_id, chunks=existing.chunks, cached=True, title=existing.title)
    chunks = chunk_text(doc.text, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    if not chunks:
        raise InputError(f"{doc.source}: the document has no text to index")
    emit({"stage": "chunked", "doc_id": doc_id, "chunks": len(chunks)})
    embed_records(store, chunk_records(doc_id, chunks), progress=emit)
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
    )
    if record:
        save_document(info, doc.text)
    emit({"stage": "indexed", "doc_id": doc_id, "chunks": len(chunks)})
    return IngestResult(doc_id=doc_id, chunks=len(chunks), cached=False, title=doc.title)


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
    """Index ``doc`` into ``namespace`` with a run context's embedder and chunking."""
    return index_document(
        doc,
        get_store(namespace, context.embedder),
        chunk_size=context.chunk_size,
        chunk_overlap=context.chunk_overlap,
        progress=progress,
    )


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
