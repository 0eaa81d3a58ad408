"""The canvas writer: a document's structure as a small graph, drawn as Mermaid, made once per document.

The model reads short excerpts of every chunk (``[c12] ...``) and returns a :class:`CanvasSpec` as
schema-enforced JSON: at most ``max_nodes`` entities or steps, each pointing to the chunk ids it came
from, and labelled relations. :mod:`nodes.canvas_render` writes the Mermaid text, so the diagram is
valid whatever the labels hold. When the JSON keeps failing the schema (after the model's retries)
or holds no usable node, a plain outline canvas is built from the section titles instead.

A canvas is cached per document (content-hash ``doc_id``): as a ``kind="canvas"`` record in the
shared Chroma store (text = the Mermaid flowchart, the spec in the metadata) and as
``canvas.json`` in the document's cache folder, so a second session on the same document makes no
canvas call. In the working memory the canvas appears as :meth:`Canvas.map_text`, a compact listing
of nodes (with their chunk ids) and relations.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import Field, ValidationError, create_model

import prompts
from nodes.canvas_render import MAX_NODES, CanvasEdge, CanvasNode, CanvasSpec, mermaid_ids, outline_spec, render_mermaid
from stores.documents import DocumentInfo, cache_path, find_document, index_identity, write_atomic
from stores.models import LLM, ModelOutputError, messages
from stores.settings import InputError
from stores.text import STOPWORDS, content_words, count_tokens, truncate_tokens
from stores.vectorstore import Hit, Record, VectorStore

CANVAS_VERSION = 1
CACHE_NAME = "canvas.json"
MIN_BRIEF_TOKENS = 12
MAX_BRIEF_TOKENS = 80
MAP_LABEL_CHARS = 60
_CHUNK_ID = re.compile(r"^\[?c?(\d{1,6})\]?$", re.IGNORECASE)

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
    """``llm`` (the model's structure) or ``outline`` (the fallback from section titles)."""
    error: str = ""
    """Why the outline fallback was used (empty for an ``llm`` canvas)."""
    max_nodes: int = MAX_NODES
    """The node limit the canvas was made with."""
    index: str = ""
    """:func:`~stores.documents.index_identity` of the chunks it was made from (their ids are in the spec)."""

    @property
    def record_id(self) -> str:
        return canvas_record_id(self.doc_id)

    def to_dict(self) -> dict[str, Any]:
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
@lru_cache(maxsize=16)
def canvas_schema(max_nodes: int) -> type[CanvasSpec]:
    """A :class:`CanvasSpec` whose JSON schema caps nodes at ``max_nodes`` (the grammar keeps output short)."""
    if not 1 <= max_nodes <= MAX_NODES:
        raise InputError(f"canvas_max_nodes must be between 1 and {MAX_NODES}, got {max_nodes}")
    node = create_model(
        "CanvasNode",
        __base__=CanvasNode,
        chunk_ids=(list[str], Field(default_factory=list, max_length=3, description="Chunk ids such as c3.")),
    )
    return create_model(  # type: ignore[call-overload, no-any-return]
        "CanvasSpec",
        __base__=CanvasSpec,
        nodes=(list[node], Field(max_length=max_nodes, description=f"At most {max_nodes} nodes.")),  # type: ignore[valid-type]
        edges=(list[CanvasEdge], Field(max_length=max_nodes + 2, description="Relations between the nodes.")),
    )


# --- input for the model --------------------------------------------------------------------------
def _section_name(section: str) -> str:
    return section.split(" > ")[-1].strip()


def chunk_briefs(hits: list[Hit], budget_tokens: int) -> str:
    """``[c3] (Section) first words...`` lines: every chunk (or an even sample) within ``budget_tokens``."""
    if not hits:
        return ""
    most = max(1, budget_tokens // MIN_BRIEF_TOKENS)
    if len(hits) > most:
        step = len(hits) / most
        hits = [hits[int(i * step)] for i in range(most)]
    per = max(MIN_BRIEF_TOKENS, min(MAX_BRIEF_TOKENS, budget_tokens // len(hits)))
    lines = []
    for hit in hits:
        section = _section_name(hit.section)
        head = f"[{hit.chunk_id}]" + (f" ({section})" if section else "")
        lines.append(f"{head} {truncate_tokens(' '.join(hit.text.split()), per)}")
    return "\n".join(lines)


def _chunk_id(raw: str) -> str | None:
    match = _CHUNK_ID.match(str(raw).strip())
    return f"c{int(match.group(1))}" if match else None


def clean_spec(spec: CanvasSpec, valid_chunks: set[str], title: str) -> CanvasSpec:
    """Keep known chunk ids only (``3``, ``[c3]`` read as ``c3``), drop empty nodes, default the title."""
    nodes = []
    for node in spec.nodes:
        label = node.label.strip()
        if not label and not node.id.strip():
            continue
        chunk_ids = [cid for cid in (_chunk_id(c) for c in node.chunk_ids) if cid in valid_chunks]
        kind = node.kind.strip().lower() if node.kind.strip().lower() in ("entity", "step") else "entity"
        nodes.append(
            node.model_copy(update={"label": label, "kind": kind, "chunk_ids": list(dict.fromkeys(chunk_ids))})
        )
    known = {_key(n.id) for n in nodes}
    edges = [e for e in spec.edges if _key(e.source) in known and _key(e.target) in known]
    return CanvasSpec(title=spec.title.strip() or title, nodes=nodes, edges=edges)


def outline_canvas_spec(info: DocumentInfo, hits: list[Hit]) -> CanvasSpec:
    """The fallback: one node per section title (chunk leads when the document has one section)."""
    sections: dict[str, list[str]] = {}
    for hit in hits:
        sections.setdefault(hit.section, []).append(hit.chunk_id)
    if len(sections) >= 2:
        pairs = [(_section_name(name), ids) for name, ids in sections.items()]
    else:
        pairs = [(f"{hit.chunk_id}: {truncate_tokens(' '.join(hit.text.split()), 8)}", [hit.chunk_id]) for hit in hits]
    return outline_spec(info.title or info.doc_id, pairs)


def write_canvas(
    llm: LLM,
    info: DocumentInfo,
    hits: list[Hit],
    *,
    max_nodes: int,
    input_tokens: int,
    max_tokens: int,
    lang: str,
) -> CanvasSpec:
    """Ask the model for the document's structure; raises :class:`ModelOutputError` when it stays invalid."""
    schema = canvas_schema(max_nodes)
    system = prompts.render("offload/canvas", lang, max_nodes=max_nodes)
    user = prompts.render(
        "offload/canvas_user",
        lang,
        title=info.title or info.doc_id,
        excerpts=chunk_briefs(hits, input_tokens),
        max_nodes=max_nodes,
    )
    raw = llm.structured(messages(system, user), schema, max_tokens=max_tokens)
    try:
        spec = CanvasSpec.model_validate(raw.model_dump())
    except ValidationError as exc:  # the subclass validated, so this is a bug in the schema mapping
        raise ModelOutputError(f"canvas JSON does not fit CanvasSpec: {exc}") from exc
    return clean_spec(spec, {h.chunk_id for h in hits}, info.title or info.doc_id)


# --- cache ----------------------------------------------------------------------------------------
def load_canvas(store: VectorStore, doc_id: str) -> Canvas | None:
    """The cached canvas of ``doc_id``: the store's record, else the cache file (copied into the store).

    Only a canvas made from the document's current index (:func:`~stores.documents.index_identity`)
    is returned: after a re-ingest with other chunk settings its chunk ids name other text.
    """
    info = find_document(store.namespace, doc_id)
    if info is None:
        return None
    index = index_identity(info)
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


def ensure_canvas(
    store: VectorStore,
    info: DocumentInfo,
    llm: LLM,
    *,
    max_nodes: int = 8,
    input_tokens: int = 1200,
    max_tokens: int = 1000,
    lang: str | None = None,
    refresh: bool = False,
) -> tuple[Canvas, bool]:
    """The document's canvas; ``cached`` is True when no model call was made."""
    if not refresh:
        cached = load_canvas(store, info.doc_id)
        if cached is not None:
            return cached, True
    hits = store.by_doc(info.doc_id)
    if not hits:
        raise InputError(
            f"document {info.doc_id!r} has no chunks in the {store.space!r} vector space; ingest it with this embedder"
        )
    error = ""
    try:
        spec = write_canvas(
            llm,
            info,
            hits,
            max_nodes=max_nodes,
            input_tokens=input_tokens,
            max_tokens=max_tokens,
            lang=lang or info.language,
        )
        if not spec.nodes:
            error = "the model's canvas has no usable node"
    except ModelOutputError as exc:
        error = str(exc)
        spec = CanvasSpec(title="", nodes=[], edges=[])
    if error:
        spec = outline_canvas_spec(info, hits)
    canvas = Canvas(
        doc_id=info.doc_id,
        title=spec.title or info.title,
        spec=spec,
        mermaid=render_mermaid(spec),
        source="outline" if error else "llm",
        error=error,
        max_nodes=max_nodes,
        index=index_identity(info),
    )
    save_canvas(store, canvas)
    return canvas, False


# --- which nodes a question touches -----------------------------------------------------------------
def content_terms(text: str) -> set[str]:
    """Words of ``text`` that carry content: no stop words, no one- or two-letter words (CJK kept)."""
    return content_words(text, stopwords=QUESTION_STOPWORDS, min_chars=3)


def touched_nodes(
    canvas: Canvas, question: str, embedder: Any, *, limit: int = 2, min_score: float = 0.82
) -> list[tuple[CanvasNode, float]]:
    """Nodes of ``canvas`` the question is about: shared content words, or label similarity over ``min_score``.

    Ranked by shared words first, then cosine similarity between the question and the label;
    only nodes that point to chunks are returned.
    """
    nodes = [n for n in canvas.spec.nodes if n.chunk_ids and (n.label.strip() or n.id.strip())]
    if not nodes or limit <= 0 or not question.strip():
        return []
    terms = content_terms(question)
    labels = [n.label or n.id for n in nodes]
    qvec = np.asarray(embedder.embed_query(question), dtype=np.float32)
    mat = np.asarray(embedder.embed_documents(labels), dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1) * (float(np.linalg.norm(qvec)) or 1.0)
    norms[norms == 0] = 1.0
    cosines = mat @ qvec / norms
    scored = []
    for node, label, cos in zip(nodes, labels, cosines, strict=True):
        shared = len(terms & content_terms(label))
        if shared or float(cos) >= min_score:
            scored.append((shared, float(cos), node))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [(node, round(cos, 4)) for _, cos, node in scored[:limit]]


def canvas_tokens(canvas: Canvas) -> int:
    """Estimated tokens of the canvas in the working memory."""
    return count_tokens(canvas.map_text())


__all__ = [
    "Canvas",
    "canvas_record_id",
    "canvas_schema",
    "canvas_tokens",
    "chunk_briefs",
    "clean_spec",
    "content_terms",
    "ensure_canvas",
    "load_canvas",
    "mermaid_key",
    "outline_canvas_spec",
    "save_canvas",
    "touched_nodes",
    "write_canvas",
]
