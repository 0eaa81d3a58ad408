"""A document's canvas: its structure as a small graph drawn as Mermaid, and how a session reads it.

A canvas is cached per document (content-hash ``doc_id``): as a ``kind="canvas"`` record in the
shared Chroma store (text = the Mermaid flowchart, the spec in the metadata) and as
``canvas.json`` in the document's cache folder (:func:`load_canvas`, :func:`save_canvas`). In the working
memory the canvas appears as :meth:`Canvas.map_text`, a compact listing of nodes (with their chunk ids)
and relations. The canvas writer that makes it is :mod:`nodes.offload.canvas_writer`.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from nodes.canvas_render import MAX_NODES, CanvasSpec, mermaid_ids, render_mermaid
from stores.cache import ProcessCache
from stores.documents import cache_path, find_document, index_identity, write_atomic
from stores.text import STOPWORDS, content_words, count_tokens
from stores.vectorstore import Record, VectorStore

CANVAS_VERSION = 1
CACHE_NAME = "canvas.json"
MAP_LABEL_CHARS = 60

QUESTION_STOPWORDS = STOPWORDS | {
    *["tell", "say", "said", "says", "please", "document", "meeting", "discuss", "discussed", "discussion"]
}
"""Words that say nothing about which part of a document a question is about."""


@dataclass
class Canvas:
    """A document's canvas: the spec, its Mermaid text and how it was made."""

    doc_id: str
    title: str
    spec: CanvasSpec
    mermaid: str
    source: str
    """``llm`` (the model's structure), ``outline`` (the fallback from section titles) or ``collection`` (a session's
    documents composed, each over its own nodes, :mod:`nodes.offload.collection_canvas`)."""
    error: str = ""
    """Why the outline fallback was used (empty for an ``llm`` canvas)."""
    max_nodes: int = MAX_NODES
    """The node limit the canvas was made with."""
    index: str = ""
    """:func:`~stores.documents.index_identity` of the chunks it was made from (their ids are in the spec)."""

    @property
    def record_id(self) -> str:
        """The canvas's record id in the store."""
        return canvas_record_id(self.doc_id)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "version": CANVAS_VERSION,
            "doc_id": self.doc_id,
            "title": self.title,
            "spec": self.spec.model_dump(),
            "mermaid": self.mermaid,
            "source": self.source,
            "error": self.error,
            "max_nodes": self.max_nodes,
            "index": self.index,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Canvas:
        """The canvas from its to_dict() form."""
        spec = CanvasSpec.model_validate(data["spec"])
        return cls(
            doc_id=str(data["doc_id"]),
            title=str(data.get("title", spec.title)),
            spec=spec,
            mermaid=str(data.get("mermaid") or render_mermaid(spec)),
            source=str(data.get("source", "llm")),
            error=str(data.get("error", "")),
            max_nodes=int(data.get("max_nodes", MAX_NODES)),
            index=str(data.get("index", "")),
        )

    def mermaid_ids(self) -> dict[str, str]:
        """Node id (as :func:`mermaid_key` gives it) -> id in the Mermaid text and the map (n1, n2, ...)."""
        return mermaid_ids(self.spec)

    def summary(self) -> dict[str, Any]:
        """What state and outputs keep of the canvas: ids and counts, not the text."""
        return {
            "id": self.record_id,
            "source": self.source,
            "nodes": len(mermaid_ids(self.spec)),
            "edges": self.mermaid.count("-->"),
            "error": self.error,
        }

    def map_text(self) -> str:
        """The canvas as the model reads it: one line per node (with chunk ids), one per relation."""
        ids = mermaid_ids(self.spec)
        lines = []
        seen: set[str] = set()
        for node in self.spec.nodes:
            key = _key(node.id)
            if key in seen:
                continue
            seen.add(key)
            chunks = f" [{', '.join(node.chunk_ids)}]" if node.chunk_ids else ""
            lines.append(f"{ids[key]} {_one_line(node.label or node.id, MAP_LABEL_CHARS)}{chunks}")
        for edge in self.spec.edges:
            source, target = ids.get(_key(edge.source)), ids.get(_key(edge.target))
            if source and target:
                label = _one_line(edge.label, 40)
                lines.append(f"{source} -> {target}" + (f": {label}" if label else ""))
        return "\n".join(dict.fromkeys(lines))


def mermaid_key(node_id: str) -> str:
    """A node id as :func:`mermaid_ids` keys it (trimmed, NFC)."""
    return unicodedata.normalize("NFC", node_id).strip()


_key = mermaid_key


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def canvas_record_id(doc_id: str) -> str:
    """Id of a document's canvas record in the store."""
    return f"{doc_id}:canvas"


# --- the model's schema ---------------------------------------------------------------------------


# --- input for the model --------------------------------------------------------------------------


# --- cache ----------------------------------------------------------------------------------------
_loaded: ProcessCache[tuple[str, str, str], Canvas] = ProcessCache("loaded canvases", 64)
"""Canvases read (or saved) by this process, by collection, document and index: a turn reads its canvas once."""


def load_canvas(store: VectorStore, doc_id: str) -> Canvas | None:
    """The cached canvas of ``doc_id``: the store's record, else the cache file (copied into the store).

    Only a canvas made from the document's current index (:func:`~stores.documents.index_identity`)
    is returned: after a re-ingest with other chunk settings its chunk ids name other text. A canvas
    read once is kept for the process (:func:`save_canvas` replaces it).
    """
    info = find_document(store.namespace, doc_id)
    if info is None:
        return None
    key = (store.collection_name, doc_id, index_identity(info))
    found = _loaded.get(key)
    if found is None:
        found = _read_stored(store, doc_id, key[2])
        if found is not None:
            _loaded.put(key, found)
    return found


def _read_stored(store: VectorStore, doc_id: str, index: str) -> Canvas | None:
    hits = store.get([canvas_record_id(doc_id)])
    if hits and hits[0].metadata.get("kind") == "canvas":
        stored = _read_canvas(str(hits[0].metadata.get("canvas", "")), index)
        if stored is not None:
            return stored
    path = cache_path(store.namespace, doc_id, CACHE_NAME)
    if path.exists():
        canvas = _read_canvas(path.read_text(encoding="utf-8"), index)
        if canvas is not None:
            _put_record(store, canvas)
        return canvas
    return None


def _read_canvas(text: str, index: str) -> Canvas | None:
    """A canvas from its JSON, or None when unreadable, of another version or of another index (then rebuilt)."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != CANVAS_VERSION or data.get("index") != index:
            return None
        return Canvas.from_dict(data)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _put_record(store: VectorStore, canvas: Canvas) -> None:
    record = Record(
        id=canvas.record_id,
        text=canvas.mermaid,
        kind="canvas",
        doc_id=canvas.doc_id,
        extra={
            "canvas": json.dumps(canvas.to_dict(), ensure_ascii=False),
            "source": canvas.source,
            "nodes": len(canvas.spec.nodes),
        },
    )
    store.add([record])


def save_canvas(store: VectorStore, canvas: Canvas) -> None:
    """Store ``canvas`` as the document's ``canvas`` record and in its cache file."""
    _put_record(store, canvas)
    write_atomic(
        cache_path(store.namespace, canvas.doc_id, CACHE_NAME),
        json.dumps(canvas.to_dict(), ensure_ascii=False, indent=1),
    )
    _loaded.put((store.collection_name, canvas.doc_id, canvas.index), canvas)


# --- words that carry content -----------------------------------------------------------------------
def content_terms(text: str) -> set[str]:
    """Words of ``text`` that carry content: no stop words, no one- or two-letter words (CJK kept)."""
    return content_words(text, stopwords=QUESTION_STOPWORDS, min_chars=3)


def canvas_tokens(canvas: Canvas) -> int:
    """Estimated tokens of the canvas in the working memory."""
    return count_tokens(canvas.map_text())


__all__ = [
    "Canvas",
    "canvas_record_id",
    "canvas_tokens",
    "content_terms",
    "load_canvas",
    "mermaid_key",
    "save_canvas",
]
