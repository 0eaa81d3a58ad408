"""The canvas writer agent: model JSON -> cleaned spec -> Mermaid, retries then outline fallback, caching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doubles.chat import ScriptedChatModel
from nodes.canvas_render import CanvasEdge, CanvasNode, CanvasSpec, render_mermaid
from nodes.ingest import ingest
from nodes.offload.canvas import CACHE_NAME, Canvas, canvas_record_id, load_canvas
from nodes.offload.canvas_writer import chunk_briefs, ensure_canvas
from stores.cache import reset_caches
from stores.documents import cache_path, get_document
from stores.models import LLM, use_chat_model
from stores.usage import track_usage
from stores.vectorstore import Hit, get_store
from tests.unit.test_canvas_render import needs_mermaid, validate

GOOD = {
    "title": "Falcon",
    "nodes": [
        {"id": "n1", "label": "Project Falcon", "kind": "entity", "chunk_ids": ["c0", "c99"]},
        {"id": "n2", "label": 'Budget "40,000 €" <approved>', "kind": "step", "chunk_ids": ["[c1]"]},
        {"id": "end", "label": "Alice Moreau -> engineering", "kind": "Person", "chunk_ids": ["2"]},
        {"id": "n4", "label": "Field trials: June–September", "kind": "step", "chunk_ids": ["c3"]},
    ],
    "edges": [
        {"source": "n1", "target": "n2", "label": "funded by"},
        {"source": "n2", "target": "n4", "label": "pays for"},
        {"source": "end", "target": "n1", "label": "leads | designs"},
        {"source": "n4", "target": "ghost", "label": "dangling"},
    ],
}


@pytest.fixture
def doc(sample_markdown: Path) -> tuple[str, object]:
    result = ingest(str(sample_markdown), chunk_size=60, chunk_overlap=0)
    return result.doc_id, get_document("default", result.doc_id)


def model(*replies: str) -> ScriptedChatModel:
    return ScriptedChatModel(replies=list(replies), default=replies[-1])


def test_model_canvas_is_cleaned_rendered_and_stored(doc: tuple[str, object]) -> None:
    doc_id, info = doc
    fake = model(json.dumps(GOOD))
    store = get_store("default")
    with use_chat_model(fake), track_usage() as usage:
        canvas, cached = ensure_canvas(store, info, LLM("offloader"), max_nodes=6)
    assert not cached and canvas.source == "llm" and canvas.error == ""
    assert usage["offloader"]["calls"] == 1 and usage["offloader"]["input"] > 0
    assert [n.chunk_ids for n in canvas.spec.nodes] == [["c0"], ["c1"], ["c2"], ["c3"]]
    assert [n.kind for n in canvas.spec.nodes] == ["entity", "step", "entity", "step"]
    assert canvas.mermaid == render_mermaid(canvas.spec)
    assert canvas.mermaid.startswith("flowchart TD\n") and "ghost" not in canvas.mermaid
    assert len([e for e in canvas.spec.edges]) == 3

    # the prompt showed every chunk's start with its id, and the node limit
    user = str(fake.calls[0][-1].content)
    assert all(f"[c{i}]" in user for i in range(int(info.chunks))) and "at most 6 nodes" in user

    record = store.get([canvas_record_id(doc_id)])[0]
    assert record.metadata["kind"] == "canvas" and record.metadata["doc_id"] == doc_id
    assert record.text == canvas.mermaid and record.metadata["source"] == "llm"
    assert json.loads(cache_path("default", doc_id, CACHE_NAME).read_text())["mermaid"] == canvas.mermaid


def test_second_request_makes_no_model_call(doc: tuple[str, object]) -> None:
    doc_id, info = doc
    fake = model(json.dumps(GOOD))
    with use_chat_model(fake):
        first, _ = ensure_canvas(get_store("default"), info, LLM("offloader"))
        reset_caches()  # a new process: the record is read back from the persistent store
        with track_usage() as usage:
            again, cached = ensure_canvas(get_store("default"), info, LLM("offloader"))
        assert cached and usage == {} and again.mermaid == first.mermaid and len(fake.calls) == 1
        # without the store record, the cache file serves it and restores the record
        get_store("default").delete(ids=[canvas_record_id(doc_id)])
        reset_caches()  # another new process
        from_file = load_canvas(get_store("default"), doc_id)
        assert from_file is not None and from_file.mermaid == first.mermaid
        assert get_store("default").count(doc_id=doc_id, kind="canvas") == 1
        # --rebuild asks again
        _, cached = ensure_canvas(get_store("default"), info, LLM("offloader"), refresh=True)
        assert not cached and len(fake.calls) == 2


def test_invalid_json_is_retried_then_outline_from_sections(doc: tuple[str, object]) -> None:
    doc_id, info = doc
    fake = model("Sure! Here is the diagram: graph TD; A-->B")
    with use_chat_model(fake), track_usage() as usage:
        canvas, cached = ensure_canvas(get_store("default"), info, LLM("offloader", max_retries=2))
    assert len(fake.calls) == 3 and usage["offloader"]["calls"] == 3  # the rejected replies' tokens are counted
    assert "does not match the required JSON schema" in str(fake.calls[1][-1].content)
    assert canvas.source == "outline" and "CanvasSpec" in canvas.error and not cached
    labels = [n.label for n in canvas.spec.nodes]
    assert labels == ["Project Falcon", "Budget", "Team", "Schedule"]
    assert [cid for n in canvas.spec.nodes for cid in n.chunk_ids] == [f"c{i}" for i in range(int(info.chunks))]
    assert load_canvas(get_store("default"), doc_id).source == "outline"  # type: ignore[union-attr]


def test_too_many_nodes_fails_the_schema(doc: tuple[str, object]) -> None:
    _, info = doc
    many = {
        "title": "x",
        "nodes": [{"id": f"n{i}", "label": f"thing {i}", "kind": "entity", "chunk_ids": ["c0"]} for i in range(9)],
        "edges": [],
    }
    fake = model(json.dumps(many))
    with use_chat_model(fake):
        canvas, _ = ensure_canvas(get_store("default"), info, LLM("offloader", max_retries=1), max_nodes=5)
    assert len(fake.calls) == 2 and canvas.source == "outline" and "CanvasSpec" in canvas.error
    assert "does not match the required JSON schema" in str(fake.calls[1][-1].content)


def test_canvas_without_usable_nodes_falls_back(doc: tuple[str, object]) -> None:
    _, info = doc
    with use_chat_model(model(json.dumps({"title": "t", "nodes": [], "edges": []}))):
        canvas, _ = ensure_canvas(get_store("default"), info, LLM("offloader"))
    assert canvas.source == "outline" and "no usable node" in canvas.error and canvas.spec.nodes


def test_outline_of_a_document_without_sections_uses_chunk_starts(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_text(" ".join(f"Sentence number {i} talks about topic {i}." for i in range(80)), encoding="utf-8")
    doc_id = ingest(str(path), chunk_size=60, chunk_overlap=0).doc_id
    info = get_document("default", doc_id)
    assert info.chunks >= 3
    with use_chat_model(model("no json here")):
        canvas, _ = ensure_canvas(get_store("default"), info, LLM("offloader", max_retries=0))
    assert canvas.source == "outline"
    assert canvas.spec.nodes[0].label.startswith("c0: Sentence number 0")
    assert len(canvas.spec.nodes) == min(int(info.chunks), 15)


def test_chunk_briefs_sample_evenly_within_budget() -> None:
    hits = [
        Hit(id=f"d:c{i}", text=f"chunk {i} " + "word " * 100, metadata={"chunk_id": f"c{i}", "section": "A > B"})
        for i in range(200)
    ]
    text = chunk_briefs(hits, 120)
    lines = text.splitlines()
    assert len(lines) == 10
    assert lines[0].startswith("[c0] (B) chunk 0") and lines[1].startswith("[c20] (B)")
    few = chunk_briefs(hits[:3], 600).splitlines()
    assert len(few) == 3 and all(len(line.split()) < 90 for line in few)


def test_map_text_lists_nodes_with_their_chunks_then_relations() -> None:
    spec = CanvasSpec(
        title="t",
        nodes=[
            CanvasNode(id="team", label="Engineering team", chunk_ids=["c2"]),
            CanvasNode(id="budget", label="Budget approval", kind="step", chunk_ids=["c1"]),
            CanvasNode(id="loose", label="Budget without chunks"),
        ],
        edges=[CanvasEdge(source="budget", target="team", label="pays")],
    )
    canvas = Canvas(doc_id="d", title="t", spec=spec, mermaid=render_mermaid(spec), source="llm")
    assert canvas.map_text().splitlines() == [
        "n1 Engineering team [c2]",
        "n2 Budget approval [c1]",
        "n3 Budget without chunks",
        "n2 -> n1: pays",
    ]
    assert canvas.summary()["nodes"] == 3 and canvas.summary()["edges"] == 1


@needs_mermaid
def test_model_and_outline_canvases_pass_mermaid_parser(doc: tuple[str, object]) -> None:
    _, info = doc
    with use_chat_model(model(json.dumps(GOOD))):
        drawn, _ = ensure_canvas(get_store("default"), info, LLM("offloader"), refresh=True)
    with use_chat_model(model("not json")):
        outline, _ = ensure_canvas(get_store("default"), info, LLM("offloader", max_retries=0), refresh=True)
    results = validate([drawn.mermaid, outline.mermaid])
    assert [r["ok"] for r in results] == [True, True], results
    shown = [v["display"] for v in results[0]["vertices"]]
    assert 'Budget "40,000 €" <approved>' in shown and "Alice Moreau -> engineering" in shown
    assert {e["display"] for e in results[0]["edges"]} == {"funded by", "pays for", "leads | designs"}
    assert [v["display"] for v in results[1]["vertices"]] == ["Project Falcon", "Budget", "Team", "Schedule"]
