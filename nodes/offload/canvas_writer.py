"""The canvas writer (the ``canvas`` node): a document's structure as a small graph, drawn as Mermaid.

The model reads short excerpts of every chunk (``[c12] ...``) and returns a :class:`CanvasSpec` as
schema-enforced JSON: at most ``max_nodes`` entities or steps, each pointing to the chunk ids it came
from, and labelled relations. :mod:`nodes.canvas_render` writes the Mermaid text, so the diagram is
valid whatever the labels hold. When the JSON keeps failing the schema (after the model's retries)
or holds no usable node, a plain outline canvas is built from the section titles instead.

The canvas is made once and cached per document (:mod:`nodes.offload.canvas`), so a second session on the
same document makes no canvas call.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import Field, ValidationError, create_model

import prompts
from nodes.canvas_render import MAX_NODES, CanvasEdge, CanvasNode, CanvasSpec, outline_spec, render_mermaid
from nodes.collection.sources import Sources
from nodes.offload.canvas import Canvas, load_canvas, mermaid_key, save_canvas
from nodes.offload.collection_canvas import session_canvas
from nodes.offload.context import OffloadContext
from nodes.offload.state import OffloadState, call_record, session_context, session_documents
from stores.cache import lru_cache
from stores.chat_stream import unstreamed
from stores.documents import DocumentInfo, get_document, index_identity
from stores.errors import InputError
from stores.labels import normalise_chunk_id
from stores.models import LLM, ModelOutputError, llm_for, messages
from stores.status import report_status
from stores.text import truncate_tokens
from stores.usage import relabel_usage, track_usage
from stores.vectorstore import Hit, VectorStore, get_store

MIN_BRIEF_TOKENS = 12
MAX_BRIEF_TOKENS = 80


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
    return create_model(
        "CanvasSpec",
        __base__=CanvasSpec,
        nodes=(list[node], Field(max_length=max_nodes, description=f"At most {max_nodes} nodes.")),  # type: ignore[valid-type]
        edges=(list[CanvasEdge], Field(max_length=max_nodes + 2, description="Relations between the nodes.")),
    )


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


def clean_spec(spec: CanvasSpec, valid_chunks: set[str], title: str) -> CanvasSpec:
    """Keep known chunk ids only (``3``, ``[c3]`` read as ``c3``), drop empty nodes, default the title."""
    nodes = []
    for node in spec.nodes:
        label = node.label.strip()
        if not label and not node.id.strip():
            continue
        chunk_ids = [cid for cid in (normalise_chunk_id(c) for c in node.chunk_ids) if cid in valid_chunks]
        kind = node.kind.strip().lower() if node.kind.strip().lower() in ("entity", "step") else "entity"
        nodes.append(
            node.model_copy(update={"label": label, "kind": kind, "chunk_ids": list(dict.fromkeys(chunk_ids))})
        )
    known = {mermaid_key(n.id) for n in nodes}
    edges = [e for e in spec.edges if mermaid_key(e.source) in known and mermaid_key(e.target) in known]
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
    system_prompt: str | None = None,
) -> CanvasSpec:
    """Ask the model for the document's structure; raises :class:`ModelOutputError` when it stays invalid.

    ``system_prompt`` is the context's ``canvas_prompt`` (None: the template file in ``lang``).
    """
    schema = canvas_schema(max_nodes)
    system = prompts.render("offload/canvas", lang, template=system_prompt, max_nodes=max_nodes)
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
    system_prompt: str | None = None,
) -> tuple[Canvas, bool]:
    """The document's canvas; ``cached`` is True when no model call was made.

    A canvas is drawn once per document: ``system_prompt``, the canvas writer's, applies to a canvas drawn now.
    Drawing it is announced as a status (:func:`stores.status.report_status`): it is the long step of a first turn.
    """
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
    report_status("canvas", "drawing the document map...")  # one long model call on the first turn
    try:
        spec = write_canvas(
            llm,
            info,
            hits,
            max_nodes=max_nodes,
            input_tokens=input_tokens,
            max_tokens=max_tokens,
            lang=lang or info.language,
            system_prompt=system_prompt,
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


def canvas(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Compose the session's canvas from its documents' (:func:`session_canvas`), cached per document.

    A document whose part is the whole map gets its canvas drawn here by the canvas writer when it has none.
    """
    ctx = session_context(state, runtime)
    store = get_store(ctx.namespace, ctx.embedder)
    sources = Sources(store, session_documents(state), state.get("tags"))
    drew: list[Canvas] = []

    def draw(doc_id: str) -> Canvas:
        made, _ = ensure_canvas(
            store,
            get_document(ctx.namespace, doc_id),
            llm_for("offloader", ctx, model=ctx.canvas_model),
            max_nodes=ctx.canvas_max_nodes,
            input_tokens=ctx.canvas_input_tokens,
            max_tokens=ctx.canvas_max_tokens,
            lang=state.get("lang"),
            system_prompt=ctx.canvas_prompt,
            refresh=True,  # the session found none
        )
        drew.append(made)
        return made

    with track_usage() as usage, unstreamed():
        made = session_canvas(sources, ctx.canvas_max_nodes, draw)
    summary = {**made.summary(), "cached": not drew}
    error = next((c.error for c in drew if c.error), "")
    how = "drawn by the model" if drew else "cached"
    if error:
        how = "outline fallback: " + error[:120]
    runtime.stream_writer({"stage": "canvas", "message": f"canvas: {summary['nodes']} nodes ({how})"})
    calls = list(state.get("calls", []))
    if usage:
        calls.append(call_record("canvas", usage))
    return {"canvas": summary, "usage": relabel_usage(usage, "canvas"), "calls": calls}
