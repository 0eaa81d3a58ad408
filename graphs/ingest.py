"""Ingestion graph: one node that reads, parses and hashes the source once, then indexes it.

One document ingested once serves every workflow; the workflows ingest their ``path`` or ``text``
through the same function (:func:`nodes.ingest.resolve_document`).

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

from nodes.context import Context
from nodes.ingest import index_for_context, input_namespace, read_source


class IngestSource(TypedDict):
    """The input less ``title`` (which the state shares with the output, where it is always set)."""

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
    namespace: NotRequired[str]
    """Namespace to ingest into (default: the context's)."""


class IngestInput(IngestSource):
    """What to ingest."""

    title: NotRequired[str]
    """Title to record (default: from the document)."""


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


class IngestState(IngestSource, IngestOutput, total=False):
    """Private state of the ingestion graph."""


def ingest(state: IngestState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read, parse and hash the source once, then chunk and embed it unless it is already indexed.

    Raw text and uploaded bytes are cleared from the state, so they never sit in a checkpoint.
    """
    ctx = runtime.context or Context()
    namespace = input_namespace(state, ctx)
    doc = read_source(
        state.get("path"),
        state.get("text"),
        state.get("title", ""),
        state.get("data"),
        state.get("filename", ""),
        state.get("encoding"),
    )
    result = index_for_context(doc, namespace, ctx, runtime.stream_writer)
    return {**result.to_dict(), "namespace": namespace, "text": "", "data": ""}


builder = StateGraph(IngestState, context_schema=Context, input_schema=IngestInput, output_schema=IngestOutput)
builder.add_node("ingest", ingest)
builder.add_edge(START, "ingest")
builder.add_edge("ingest", END)

graph = builder.compile()
graph.name = "ingest"
