"""The canvas a session reads: its documents' canvases composed into one map.

Each document of the run gives a part: the nodes and relations of its own canvas when one was drawn
(:mod:`nodes.offload.canvas`), else one node per section title. A document whose labels carry a tag
(:meth:`~nodes.collection.sources.Sources.tag`) is headed by a document node (``[2] Title``, pointing to its first
chunk) joined to each node of its part shown; the headed parts share the room their heads leave under
``max_nodes``, their nodes taken in turn (past ``max_nodes`` documents, the first ones and a ``+N more documents``
node). A part without a head is the whole map: it is shown whole, and the canvas writer draws its canvas when
none was (:func:`session_canvas`'s ``draw``). A composition that adds no node or relation to a drawn canvas is that
canvas. Node chunk ids are the run's labels (``c3``, or ``2:c3``).

Compositions are made without a model call, so a session's cost does not grow with its documents. Those that
are no drawn canvas are kept per collection version (the documents and the index each publishes, their tags and
the canvases drawn of them): in the process and in the namespace's ``collections`` folder, each file with the ids
of its documents, so forgetting one deletes the canvases that name it (:func:`forget_collection_canvases`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from typing import overload

from nodes.canvas_render import CanvasEdge, CanvasNode, CanvasSpec, render_mermaid
from nodes.collection.resolve import Member, collection_version, collections_dir
from nodes.collection.sources import Sources
from nodes.offload.canvas import Canvas, load_canvas
from stores.cache import ProcessCache
from stores.documents import write_atomic

_made: ProcessCache[tuple[str, str, int], Canvas] = ProcessCache("collection canvases", 32)

Draw = Callable[[str], Canvas]
"""The canvas writer drawing a document's canvas: document id -> its canvas (stored for later sessions)."""


@dataclass
class _Part:
    """A document's part of the map: its head (None for the whole map) and its own nodes and relations."""

    head: CanvasNode | None
    nodes: list[CanvasNode]
    edges: list[CanvasEdge]


@overload
def session_canvas(sources: Sources, max_nodes: int) -> Canvas | None: ...


@overload
def session_canvas(sources: Sources, max_nodes: int, draw: Draw) -> Canvas: ...


def session_canvas(sources: Sources, max_nodes: int, draw: Draw | None = None) -> Canvas | None:
    """The canvas a session over ``sources`` reads: its documents' parts composed (see the module).

    A part without a head needs its document's drawn canvas: ``draw`` makes it when missing; without ``draw``
    the session has no canvas yet (None).
    """
    drawn: dict[str, Canvas | None] = {}
    for member in sources.members:
        own = load_canvas(sources.store, member.doc_id)
        if own is None and sources.tag(member.doc_id) is None:
            if draw is None:
                return None
            own = draw(member.doc_id)
        drawn[member.doc_id] = own
    return _kept(sources, max_nodes, drawn)


def _kept(sources: Sources, max_nodes: int, drawn: dict[str, Canvas | None]) -> Canvas:
    """The composition of ``sources`` (made once per collection version, drawn canvases and node limit)."""
    version = collection_version(sources.store.namespace, sources.doc_ids)
    tags = sources.tags()
    if tags != list(range(1, len(tags) + 1)):  # a thread's own tags, which its canvas names
        version += "-" + _digest(tags)
    own = [[c.doc_id, c.index, c.mermaid] for c in drawn.values() if c is not None]
    made_of = f"{version}-{max_nodes}-{_digest(own)}"
    path = collections_dir(sources.store.namespace) / f"canvas-{sources.store.space}-{made_of}.json"

    def build() -> Canvas:
        if path.exists():
            try:
                return Canvas.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError):
                pass  # unreadable: made again below
        made = compose_canvas(sources, max_nodes, drawn, version)
        if not any(made is c for c in drawn.values()):  # a drawn canvas is kept with its document
            write_atomic(path, json.dumps({**made.to_dict(), "doc_ids": list(sources.doc_ids)}, ensure_ascii=False))
        return made

    return _made.get_or_build((sources.store.collection_name, made_of, max_nodes), build)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:8]


def forget_collection_canvases(namespace: str, doc_id: str) -> int:
    """Delete the kept canvases of every collection of ``namespace`` that included ``doc_id``; how many files went.

    A file that does not list its documents (or cannot be read) goes too: it may name it.
    """
    gone = 0
    for path in collections_dir(namespace).glob("canvas-*.json"):
        try:
            members = json.loads(path.read_text(encoding="utf-8")).get("doc_ids")
        except (OSError, ValueError, AttributeError):
            members = None
        if not isinstance(members, list) or doc_id in members:
            path.unlink(missing_ok=True)
            gone += 1
    if gone:
        _made.clear()  # made again from the files left, or anew
    return gone


def compose_canvas(sources: Sources, max_nodes: int, drawn: dict[str, Canvas | None], version: str) -> Canvas:
    """The parts of ``sources``' documents as one canvas (``drawn``: each document's drawn canvas, or None)."""
    members = sources.members
    parts = [_part(sources, m, drawn.get(m.doc_id)) for m in members]
    nodes = [node for p in parts if p.head is None for node in p.nodes]
    edges = [edge for p in parts if p.head is None for edge in p.edges]
    headed = [(p.head, p) for p in parts if p.head is not None]
    top = headed if len(headed) <= max_nodes else headed[: max(1, max_nodes - 1)]
    nodes += [head for head, _ in top]
    if len(headed) > len(top):
        nodes.append(CanvasNode(id="more", label=f"+{len(headed) - len(top)} more documents", kind="section"))
    room = max_nodes - len(nodes)
    shown: set[str] = set()
    for head, child in _in_turn([p.nodes for _, p in top], [head for head, _ in top]):
        if room <= 0:
            break
        nodes.append(child)
        shown.add(child.id)
        edges.append(CanvasEdge(source=head.id, target=child.id, label=""))
        room -= 1
    edges += [e for _, p in top for e in p.edges if e.source in shown and e.target in shown]
    same = [c for c in drawn.values() if c is not None and c.spec.nodes == nodes and c.spec.edges == edges]
    if same:
        return same[0]
    spec = CanvasSpec(title=f"{len(members)} documents", nodes=nodes, edges=edges)
    return Canvas(
        doc_id=f"collection-{version}",
        title=spec.title,
        spec=spec,
        mermaid=render_mermaid(spec),
        source="collection",
        max_nodes=max_nodes,
        index=version,
    )


def _in_turn(children: list[list[CanvasNode]], heads: list[CanvasNode]) -> Iterator[tuple[CanvasNode, CanvasNode]]:
    """The first child of every head, then the second of every head, ..."""
    for row in zip_longest(*children):
        for owner, child in zip(heads, row, strict=True):
            if child is not None:
                yield owner, child


def _part(sources: Sources, member: Member, drawn: Canvas | None) -> _Part:
    """A document's part: its drawn canvas's nodes and relations, else one node per section; headed when tagged."""
    tag = sources.tag(member.doc_id)
    prefix = "" if tag is None else f"d{tag}-"  # node ids stay apart across parts
    head = None
    if tag is not None:
        first = [sources.label(member.doc_id, "c0")]
        head = CanvasNode(id=f"d{tag}", label=sources.heading(member.doc_id), kind="section", chunk_ids=first)
    if drawn is None:
        first_chunk: dict[str, str] = {}
        for hit in sources.store.by_doc(member.doc_id):
            if hit.section:
                first_chunk.setdefault(hit.section.split(" > ")[-1].strip(), hit.chunk_id)
        own = [
            CanvasNode(id=f"{i}", label=s, kind="entity", chunk_ids=[c]) for i, (s, c) in enumerate(first_chunk.items())
        ]
        relations: list[CanvasEdge] = []
    else:
        own, relations = list(drawn.spec.nodes), list(drawn.spec.edges)
    nodes = [
        n.model_copy(update={"id": prefix + n.id, "chunk_ids": [sources.label(member.doc_id, c) for c in n.chunk_ids]})
        for n in own
    ]
    edges = [e.model_copy(update={"source": prefix + e.source, "target": prefix + e.target}) for e in relations]
    return _Part(head, nodes, edges)
