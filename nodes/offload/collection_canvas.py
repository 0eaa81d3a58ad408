"""A collection's canvas: its documents as the top level, each over a few nodes of its own.

Made without a model call, so a session's cost does not grow with its collection: one node per
document (``[2] Title``, pointing to its first chunk; past ``max_nodes`` documents, the first ones
and a ``+N more documents`` node), then, while nodes are left, the nodes of each document's own
canvas when one was drawn before (:mod:`nodes.offload.canvas`), else its section titles, taken in
turn from each document and joined to it. Node chunk ids are the collection's labels (``2:c3``).
Kept per collection version (the documents and the index each publishes, and their tags): in the process and in
the namespace's ``collections`` folder, each file with the ids of its documents, so forgetting one
deletes the canvases that name it (:func:`forget_collection_canvases`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from itertools import zip_longest

from nodes.canvas_render import CanvasEdge, CanvasNode, CanvasSpec, render_mermaid
from nodes.collection.resolve import Member, collection_version, collections_dir
from nodes.collection.sources import Sources
from nodes.offload.canvas import Canvas, load_canvas
from stores.cache import ProcessCache
from stores.documents import write_atomic

_made: ProcessCache[tuple[str, str, int], Canvas] = ProcessCache("collection canvases", 32)


def sources_canvas(sources: Sources, max_nodes: int) -> Canvas | None:
    """The canvas a session over ``sources`` reads.

    One document's is its own (None until drawn, :func:`nodes.offload.canvas_writer.ensure_canvas`); a
    collection's is made here from its documents' (:func:`collection_canvas`).
    """
    return load_canvas(sources.store, sources.doc_id) if sources.single else collection_canvas(sources, max_nodes)


def collection_canvas(sources: Sources, max_nodes: int) -> Canvas:
    """The canvas of ``sources``' collection (made once per collection version and node limit)."""
    version = collection_version(sources.store.namespace, sources.doc_ids)
    tags = sources.tags()
    if tags != list(range(1, len(tags) + 1)):  # a thread's own tags, which its canvas names
        version += "-" + hashlib.sha256(json.dumps(tags).encode()).hexdigest()[:8]
    key = (sources.store.collection_name, version, max_nodes)
    name = f"canvas-{sources.store.space}-{version}-{max_nodes}.json"
    path = collections_dir(sources.store.namespace) / name

    def build() -> Canvas:
        if path.exists():
            try:
                return Canvas.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError):
                pass  # unreadable: made again below
        made = build_collection_canvas(sources, max_nodes, version)
        write_atomic(path, json.dumps({**made.to_dict(), "doc_ids": list(sources.doc_ids)}, ensure_ascii=False))
        return made

    return _made.get_or_build(key, build)


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


def build_collection_canvas(sources: Sources, max_nodes: int, version: str) -> Canvas:
    """The documents of ``sources`` as the top level of a canvas of at most ``max_nodes`` nodes."""
    members = sources.members
    top = members if len(members) <= max_nodes else members[: max(1, max_nodes - 1)]
    nodes = [
        CanvasNode(
            id=f"d{m.tag}", label=f"[{m.tag}] {m.name}", kind="section", chunk_ids=[sources.label(m.doc_id, "c0")]
        )
        for m in top
    ]
    if len(members) > len(top):
        nodes.append(CanvasNode(id="more", label=f"+{len(members) - len(top)} more documents", kind="section"))
    edges: list[CanvasEdge] = []
    room = max_nodes - len(nodes)
    for m, child in _in_turn([_children(sources, m) for m in top], top):
        if room <= 0:
            break
        nodes.append(child)
        edges.append(CanvasEdge(source=f"d{m.tag}", target=child.id, label=""))
        room -= 1
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


def _in_turn(children: list[list[CanvasNode]], owners: list[Member]) -> Iterator[tuple[Member, CanvasNode]]:
    """The first child of every document, then the second of every document, ..."""
    for row in zip_longest(*children):
        for owner, child in zip(owners, row, strict=True):
            if child is not None:
                yield owner, child


def _children(sources: Sources, member: Member) -> list[CanvasNode]:
    """A document's own canvas nodes (when one was drawn), else one node per section, under the document."""
    drawn = load_canvas(sources.store, member.doc_id)
    pairs: list[tuple[str, list[str]]]
    if drawn is not None:
        pairs = [(n.label or n.id, list(n.chunk_ids)) for n in drawn.spec.nodes]
    else:
        first: dict[str, str] = {}
        for hit in sources.store.by_doc(member.doc_id):
            if hit.section:
                first.setdefault(hit.section.split(" > ")[-1].strip(), hit.chunk_id)
        pairs = [(section, [chunk]) for section, chunk in first.items()]
    return [
        CanvasNode(
            id=f"d{member.tag}-{i}",
            label=label,
            kind="entity",
            chunk_ids=[sources.label(member.doc_id, c) for c in chunks],
        )
        for i, (label, chunks) in enumerate(pairs, start=1)
    ]
