"""Ingestion graph: load -> index. One document ingested once serves every workflow.

Input: ``path`` (txt, md, pdf, docx, html), ``text``, or ``data`` (a file's bytes in base64, with
its ``filename``: how documents arrive over HTTP), optional ``namespace`` and ``title``.
Output: ``doc_id``, ``chunks``, ``cached``, ``title``. Progress is streamed as custom events
(``stream_mode="custom"``).
"""

from __future__ import annotations

from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.context import Context, resolve_context, stream_writer
from nodes.ingest import index_document, is_indexed, read_source
from stores.documents import DocumentInfo
from stores.settings import InputError
from stores.text import content_hash
from stores.vectorstore import get_store


class IngestInput(TypedDict):
    """What to ingest."""

    path: NotRequired[str]
    """Path of a txt, md, pdf, docx or html file."""
    text: NotRequired[str]
    """Raw text, instead of a path."""
    data: NotRequired[str]
    """A file's bytes in base64 (txt, md, pdf, docx, html), instead of a path; give ``filename`` too."""
    filename: NotRequired[str]
    """Name of the file in ``data``: its suffix gives the type."""
    encoding: NotRequired[str]
    """Encoding of a text or html file (default: UTF-8, or a confident guess)."""
    title: NotRequired[str]
    """Title to record (default: from the document)."""
    namespace: NotRequired[str]
    """Namespace to ingest into (default: the context's)."""


class IngestOutput(TypedDict):
    """What ingestion produced."""

    doc_id: str
    """Content-hash id of the document."""
    chunks: int
    """Number of chunks indexed."""
    cached: bool
    """True when the document was already indexed and nothing was embedded."""
    title: str
    """Title of the document."""


class IngestState(IngestInput, IngestOutput, total=False):
    """Private state of the ingestion graph."""


def load(state: IngestState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read and validate the source; report whether it is already indexed."""
    ctx = resolve_context(runtime, Context)
    namespace = state.get("namespace") or ctx.namespace
    doc = read_source(
        state.get("path"),
        state.get("text"),
        state.get("title", ""),
        state.get("data"),
        state.get("filename", ""),
        state.get("encoding"),
    )
    store = get_store(namespace, ctx.embedder)
    doc_id = content_hash(doc.text)
    info: DocumentInfo | None = is_indexed(store, doc_id, ctx.chunk_size, ctx.chunk_overlap)
    stream_writer()({"stage": "loaded", "doc_id": doc_id, "title": doc.title, "cached": info is not None})
    update: dict[str, Any] = {"doc_id": doc_id, "namespace": namespace, "title": doc.title, "cached": info is not None}
    if info is not None:
        update["chunks"] = info.chunks
    return update


def index(state: IngestState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Chunk the document and embed the chunks into the store."""
    ctx = resolve_context(runtime, Context)
    path, title, encoding = state.get("path"), state.get("title", ""), state.get("encoding")
    doc = read_source(path, None, title, encoding=encoding) if path else None
    if doc is None:
        raise InputError("raw text must be ingested in one step; give the text again")
    result = index_document(
        doc,
        get_store(state["namespace"], ctx.embedder),
        chunk_size=ctx.chunk_size,
        chunk_overlap=ctx.chunk_overlap,
        progress=stream_writer(),
    )
    return {"doc_id": result.doc_id, "chunks": result.chunks, "cached": result.cached}


def route_after_load(state: IngestState) -> str:
    """Stop when the document is already indexed."""
    return END if state.get("cached") else "index"


def ingest_text(state: IngestState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Validate and index raw text or uploaded bytes in one step (so they never sit in a checkpoint)."""
    ctx = resolve_context(runtime, Context)
    namespace = state.get("namespace") or ctx.namespace
    doc = read_source(
        None,
        state.get("text"),
        state.get("title", ""),
        state.get("data"),
        state.get("filename", ""),
        state.get("encoding"),
    )
    result = index_document(
        doc,
        get_store(namespace, ctx.embedder),
        chunk_size=ctx.chunk_size,
        chunk_overlap=ctx.chunk_overlap,
        progress=stream_writer(),
    )
    return {**result.to_dict(), "namespace": namespace, "text": "", "data": ""}


def route_start(state: IngestState) -> str:
    """Files go through load/index; raw text and uploaded bytes are handled in one node."""
    return "load" if state.get("path") else "ingest_text"


builder = StateGraph(IngestState, context_schema=Context, input_schema=IngestInput, output_schema=IngestOutput)
builder.add_node("load", load)
builder.add_node("index", index)
builder.add_node("ingest_text", ingest_text)
builder.add_conditional_edges(START, route_start, ["load", "ingest_text"])
builder.add_conditional_edges("load", route_after_load, ["index", END])
builder.add_edge("index", END)
builder.add_edge("ingest_text", END)

graph = builder.compile()
graph.name = "ingest"
