"""Ingestion graph: one node that reads, parses and hashes the source once, then indexes it.

One document ingested once serves every workflow; the workflows ingest their ``path`` or ``text``
through the same function (:func:`nodes.ingest.resolve_document`).

Input: ``path`` (txt, md, pdf, docx, html), ``text``, or ``data`` (a file's bytes in base64, with
its ``filename``: how documents arrive over HTTP), optional ``namespace`` and ``title``.
Output: ``doc_id``, ``chunks``, ``cached``, ``title``. Progress is streamed as custom events
(``stream_mode="custom"``).
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.context import NAME, Context, described
from nodes.ingest import index_for_context, input_namespace, read_source
from stores.embedders import check_embedder_installed


class IngestSource(TypedDict):
    """The input less ``title`` (which the state shares with the output, where it is always set).

    Give exactly one of ``text``, ``data`` (with ``filename``) or ``path``.
    """

    path: NotRequired[
        Annotated[
            str,
            described(
                "A txt, md, pdf, docx or html file on the server, relative to its LONGDOC_INGEST_ROOT (servers "
                "without one read no files of their own: send text or data instead).",
                example="reports/falcon.md",
                maxLength=4096,
            ),
        ]
    ]
    text: NotRequired[
        Annotated[
            str,
            described(
                "The document as plain text or Markdown (headings become sections), instead of data or path; "
                "at most LONGDOC_MAX_TEXT_CHARS characters (5,000,000 by default).",
                example="# Project Falcon\n\nBob Chen manages procurement. Field trials start in June.",
                minLength=1,
            ),
        ]
    ]
    data: NotRequired[
        Annotated[
            str,
            described(
                "A file's bytes in base64 (pdf, docx, html, md or txt), instead of text or path; give filename "
                "too. At most LONGDOC_MAX_BYTES once decoded (200 MiB by default).",
                example="JVBERi0xLjQK...",
                contentEncoding="base64",
            ),
        ]
    ]
    filename: NotRequired[
        Annotated[
            str,
            described(
                "Name of the file in data: its suffix (.pdf, .docx, .html, .md, .txt) gives the type.",
                example="falcon-report.pdf",
                maxLength=255,
            ),
        ]
    ]
    encoding: NotRequired[
        Annotated[
            str,
            described(
                "Encoding of a text or html file when it is not UTF-8 (default: UTF-8, or UTF-16 with its mark).",
                example="latin-1",
                maxLength=40,
            ),
        ]
    ]
    namespace: NotRequired[
        Annotated[
            str,
            described(
                "Namespace to ingest into (default: the caller's own); one namespace never sees another's documents.",
                example="team1",
                pattern=NAME,
            ),
        ]
    ]


class IngestInput(IngestSource):
    """What to ingest."""

    title: NotRequired[
        Annotated[
            str,
            described(
                "Title to record (default: the document's own, or its first line).",
                example="Falcon report",
                maxLength=300,
            ),
        ]
    ]


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
    check_embedder_installed(ctx.embedder)  # a missing extra is said before the document is read
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
