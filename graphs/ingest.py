"""Ingestion graph: one node that reads, parses and hashes each source once, then indexes it.

One document ingested once serves every workflow; the workflows ingest their ``path`` or ``text``
through the same functions (:func:`nodes.ingest_dir.ingest_folder`, :func:`nodes.ingest_dir.ingest_file`,
:func:`nodes.ingest.resolve_document`), and so does the command line's ``longdoc ingest``.

Input: ``path`` (a txt, md, pdf, docx or html file, or a folder of them), ``text``, or ``data`` (a file's
bytes in base64, with its ``filename``: how documents arrive over HTTP), optional ``namespace`` and ``title``.
A folder is counted first (more than ``LONGDOC_MAX_DOCUMENTS`` files is refused before any is read), its
new and changed files are ingested, unchanged ones skipped (the manifest), and links out of it left out.
Output: ``documents`` (each one's ``doc_id``, ``title``, ``source``, ``chunks``, ``cached``), ``chunks``,
``cached``, ``superseded`` (ids of the earlier versions of files ingested again with other content:
see :mod:`surfaces.superseded`), and for one document its ``doc_id`` and ``title``, for a folder
``files`` and ``failed``. Progress is streamed as custom events (``stream_mode="custom"``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.context import NAME, Context, described
from nodes.ingest import index_for_context, input_namespace, read_source
from nodes.ingest_dir import DirectoryResult, ingest_file, ingest_folder
from stores.documents import find_document
from stores.embedders import check_embedder_installed
from stores.errors import InputError


class IngestSource(TypedDict):
    """The input less ``title`` (which the state shares with the output, where it is always set).

    Give exactly one of ``text``, ``data`` (with ``filename``) or ``path``.
    """

    path: NotRequired[
        Annotated[
            str,
            described(
                "A txt, md, pdf, docx or html file on the server, or a folder of them (every document in it, "
                "unchanged files skipped), relative to its LONGDOC_INGEST_ROOT (servers without one read no "
                "files of their own: send text or data instead).",
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


class IngestedDocument(TypedDict):
    """One document an ingest produced."""

    doc_id: str
    """Content-hash id of the document: how ask, summarize and chat name it."""
    title: str
    """Title of the document."""
    source: str
    """Its file: relative to the folder ingested, or the file's name ("text" for text)."""
    chunks: int
    """Number of chunks indexed."""
    cached: bool
    """True when it was already indexed (or its file unchanged) and nothing was embedded."""


class FailedFile(TypedDict):
    """A file of a folder that could not be ingested."""

    path: str
    """The file, relative to the folder."""
    error: str
    """Why."""


class IngestOutput(TypedDict):
    """What ingestion produced."""

    doc_id: NotRequired[str]
    """Content-hash id of the document (one file, text or data; a folder's are in documents)."""
    chunks: int
    """Number of chunks indexed, all documents together."""
    cached: bool
    """True when every document was already indexed and nothing was embedded."""
    title: NotRequired[str]
    """Title of the document (one file, text or data)."""
    documents: list[IngestedDocument]
    """The documents ingested: one, or a folder's, in file order."""
    superseded: list[str]
    """Ids of the earlier versions of the files ingested again with other content, removed from the store."""
    files: NotRequired[int]
    """Files of the folder (indexed, unchanged or failed)."""
    failed: NotRequired[list[FailedFile]]
    """Files of the folder that could not be ingested (the others were)."""


class IngestState(IngestSource, IngestOutput, total=False):
    """Private state of the ingestion graph."""


def ingest(state: IngestState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Read, parse and hash the source once, then chunk and embed it unless it is already indexed.

    A folder ``path`` ingests its new and changed files. Raw text and uploaded bytes are cleared from the
    state, so they never sit in a checkpoint.
    """
    ctx = runtime.context or Context()
    namespace = input_namespace(state, ctx)
    check_embedder_installed(ctx.embedder)  # a missing extra is said before the document is read
    path = state.get("path")
    cleared = {"namespace": namespace, "text": "", "data": ""}
    if path and Path(path).expanduser().is_dir():
        if state.get("text") or state.get("data"):
            raise InputError("give one of path, text or data, not several")
        folder = ingest_folder(path, namespace, ctx, runtime.stream_writer, state.get("encoding"))
        return {**folder_output(folder, namespace, Path(path).expanduser()), **cleared}
    old = None
    if path and not (state.get("text") or state.get("data")):
        result, old = ingest_file(
            path, namespace, ctx, runtime.stream_writer, title=state.get("title", ""), encoding=state.get("encoding")
        )
        source = Path(path).name
    else:
        doc = read_source(
            path,
            state.get("text"),
            state.get("title", ""),
            state.get("data"),
            state.get("filename", ""),
            state.get("encoding"),
        )
        result = index_for_context(doc, namespace, ctx, runtime.stream_writer)
        source = Path(doc.source).name
    row = {**result.to_dict(), "source": source}
    return {**result.to_dict(), "documents": [row], "superseded": [old] if old else [], **cleared}


def folder_output(result: DirectoryResult, namespace: str, folder: Path) -> dict[str, Any]:
    """The graph's output for a folder: its documents in file order, files relative to the folder."""

    def relative(path: str) -> str:
        return Path(path).relative_to(folder).as_posix() if Path(path).is_relative_to(folder) else Path(path).name

    where = str(folder.resolve())
    rows = []
    for item in sorted(result.indexed + result.skipped, key=lambda i: str(i["path"])):
        info = find_document(namespace, str(item["doc_id"]))
        title = info.title if info is not None else ""
        cached = bool(item.get("cached", True))
        rows.append(
            {
                "doc_id": item["doc_id"],
                "title": title,
                "source": relative(str(item["path"])),
                "chunks": item["chunks"],
                "cached": cached,
            }
        )
    failed = [
        {"path": relative(f["path"]), "error": f["error"].replace(where + os.sep, "").replace(str(folder) + os.sep, "")}
        for f in result.failed
    ]
    return {
        "documents": rows,
        "chunks": sum(int(r["chunks"]) for r in rows),
        "cached": all(r["cached"] for r in rows),
        "superseded": result.superseded,
        "files": len(rows) + len(failed),
        "failed": failed,
    }


builder = StateGraph(IngestState, context_schema=Context, input_schema=IngestInput, output_schema=IngestOutput)
builder.add_node("ingest", ingest)
builder.add_edge(START, "ingest")
builder.add_edge("ingest", END)

graph = builder.compile()
graph.name = "ingest"
