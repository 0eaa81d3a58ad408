"""Collections: which documents a run reads, retrieval across them, their labels, listings and tenants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from nodes.collection import index as collection_index_module
from nodes.collection.index import CollectionIndex, build_term_counts, collection_bm25, term_counts
from nodes.collection.resolve import collection_version, resolve_documents
from nodes.collection.sources import Sources, cited_documents
from nodes.ingest import ingest
from nodes.summarize.context import SummarizeContext
from stores.documents import count_words, document_listing, get_document
from stores.errors import InputError
from stores.labels import label_position, split_label
from stores.text import lexical_tokens
from stores.vectorstore import get_store
from surfaces.cli import main

TOPICS = {
    "pumps.md": ("Pumps", "The pump team tested well {i} near Nakuru on day {i} and logged {i} litres."),
    "otters.md": ("Otters", "Sea otter {i} ate {i} urchins on Monday and slept holding otter {j}."),
    "budget.md": ("Budget", "The board approved {i},000 euros for panel batch {i} in March of year {j}."),
}


def write_docs(folder: Path, names: tuple[str, ...] = tuple(TOPICS), sentences: int = 40) -> list[Path]:
    """Files with distinct sentences, a heading and two sections each."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        title, line = TOPICS.get(name, (Path(name).stem.title(), "Item {i} of " + Path(name).stem + " is {j}."))
        half = [line.format(i=i, j=i + 1) for i in range(sentences)]
        body = " ".join(half[: sentences // 2]) + "\n\n## Later\n\n" + " ".join(half[sentences // 2 :])
        path = folder / name
        path.write_text(f"# {title}\n\n## First\n\n{body}\n", encoding="utf-8")
        paths.append(path)
    return paths


@pytest.fixture
def docs(tmp_path: Path) -> list[str]:
    """Three ingested documents (pumps, otters, budget) in namespace ``default``."""
    return [ingest(str(p), chunk_size=120, chunk_overlap=20).doc_id for p in write_docs(tmp_path / "docs")]


class _Ctx:
    """The context fields document resolution reads."""

    def __init__(self, namespace: str = "default") -> None:
        self.namespace, self.embedder, self.chunk_size, self.chunk_overlap = namespace, "hash", 120, 20


# --- which documents ----------------------------------------------------------------------------------
def test_doc_ids_are_checked_deduplicated_and_kept_in_order(docs: list[str]) -> None:
    ctx = _Ctx()
    assert resolve_documents({"doc_ids": [docs[2], docs[0], docs[2]]}, ctx) == [docs[2], docs[0]]
    with pytest.raises(InputError, match="not ingested in namespace 'default': '0000000000000000'"):
        resolve_documents({"doc_ids": [docs[0], "0000000000000000"]}, ctx)
    with pytest.raises(InputError, match="takes a list"):
        resolve_documents({"doc_ids": docs[0]}, ctx)
    with pytest.raises(InputError, match="not doc_id and doc_ids"):
        resolve_documents({"doc_id": docs[0], "doc_ids": docs}, ctx)
    with pytest.raises(InputError, match="give exactly one of doc_id, path or text to name the document"):
        resolve_documents({"doc_id": docs[0], "text": "x"}, ctx)  # the one-document rule keeps its message
    assert resolve_documents({"doc_id": docs[1]}, ctx) == [docs[1]]
    with pytest.raises(InputError, match="not ingested in namespace 'other'"):
        resolve_documents({"doc_ids": docs[:2], "namespace": "other"}, ctx)  # another namespace's view


def test_the_whole_namespace_is_every_document_of_its_embedder(docs: list[str]) -> None:
    assert sorted(resolve_documents({"whole_namespace": True}, _Ctx())) == sorted(docs)
    with pytest.raises(InputError, match="holds no document"):
        resolve_documents({"whole_namespace": True, "namespace": "empty"}, _Ctx())
    with pytest.raises(InputError, match="takes true"):
        resolve_documents({"whole_namespace": "yes"}, _Ctx())


def test_a_folder_ingests_what_is_new_and_leaves_out_links_that_lead_out(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    write_docs(folder, ("pumps.md", "otters.md"))
    outside = write_docs(tmp_path / "private", ("budget.md",))[0]
    (folder / "link.md").symlink_to(outside)
    events: list[dict[str, Any]] = []
    first = resolve_documents({"path": str(folder)}, _Ctx(), events.append)
    assert len(first) == 2 and {get_document("default", d).title for d in first} == {"Pumps", "Otters"}
    write_docs(folder, ("extra.md",))
    again = resolve_documents({"path": str(folder)}, _Ctx(), events.append)
    assert set(first) < set(again) and len(again) == 3  # the new file joined, in file-name order
    assert [get_document("default", d).title for d in again] == ["Extra", "Otters", "Pumps"]
    assert any(e.get("postfix") == "unchanged skipped" and e.get("done") == 2 for e in events)


# --- retrieval across documents ---------------------------------------------------------------------
def test_collection_bm25_scores_as_one_index_over_all_chunks(docs: list[str]) -> None:
    import bm25s

    store = get_store()
    hits = [h for d in docs for h in store.by_doc(d)]
    one = bm25s.BM25()
    one.index([lexical_tokens(h.text) for h in hits], show_progress=False)
    query = "otter urchins Monday board euros"
    expected = np.asarray(one.get_scores(lexical_tokens(query)), dtype=np.float64)
    got = np.concatenate(collection_bm25([term_counts(store, d) for d in docs], query))
    assert np.allclose(got, expected, rtol=1e-4, atol=1e-5) and got.max() > 0


def test_collection_search_reaches_every_document_and_no_other(docs: list[str]) -> None:
    store = get_store()
    index = CollectionIndex(store, docs[:2])  # pumps and otters, not the budget
    hits = index.search("sea otter 7 urchins", 3)
    assert hits and hits[0].metadata["doc_id"] == docs[1]
    everything = index.search("board approved euros panel batch March", 50)
    assert {h.metadata["doc_id"] for h in everything} <= set(docs[:2])
    sources = Sources(store, docs)
    tagged = sources.search("board approved euros panel batch", 2)
    label = tagged[0].chunk_id
    assert label.startswith("3:c") and sources.locate(label) == (docs[2], label[2:])
    assert sources.name(tagged[0].chunk_id) == "Budget"


def test_labels_name_the_document_and_the_sentence() -> None:
    assert split_label("2:c12.3") == (2, "c12.3") and split_label("c4") == (None, "c4")
    assert label_position("2:c12.3") == (2, 12, 3) and label_position("c4") == (0, 4, 0)
    with pytest.raises(InputError):
        split_label("chunk four")
    documents = [{"tag": 1, "title": "", "source": "/data/a/report.pdf", "doc_id": "x"}, {"tag": 2, "title": "Otters"}]
    assert cited_documents(["1:c3", "2:c0.2", "c5", "9:c1"], documents) == [
        {"label": "1:c3", "document": "report.pdf"},
        {"label": "2:c0.2", "document": "Otters"},
    ]


# --- incremental ----------------------------------------------------------------------------------------
def test_adding_a_document_counts_only_its_own_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = tuple(f"doc{i:02d}.md" for i in range(8))
    docs = [ingest(str(p), chunk_size=120, chunk_overlap=20).doc_id for p in write_docs(tmp_path / "many", names)]
    built: list[int] = []
    real = collection_index_module.build_term_counts
    monkeypatch.setattr(collection_index_module, "build_term_counts", lambda hits: built.append(1) or real(hits))
    store = get_store()
    before = CollectionIndex(store, docs[:-1]).search("item 3 of doc05", 3)
    assert len(built) == 7
    version = collection_version("default", docs[:-1])
    grown = CollectionIndex(store, docs).search("item 3 of doc07", 3)
    assert len(built) == 8  # the new document only: the other seven were kept
    assert collection_version("default", docs) != version and before and grown
    from stores.cache import reset_caches

    reset_caches()  # a new process: the counts come back from each document's cache file
    CollectionIndex(store, docs).search("item 3 of doc07", 3)
    assert len(built) == 8


def test_term_counts_of_one_document_match_its_chunks(docs: list[str]) -> None:
    hits = get_store().by_doc(docs[0])
    counts = build_term_counts(hits)
    assert counts.record_ids == [h.id for h in hits]
    assert int(counts.lengths.sum()) == sum(len(lexical_tokens(h.text)) for h in hits)
    column = counts.column("nakuru")
    assert column is not None and int(column[1].sum()) == sum(lexical_tokens(h.text).count("nakuru") for h in hits)
    assert list(column[0]) == [i for i, h in enumerate(hits) if "nakuru" in lexical_tokens(h.text)]
    assert counts.column("urchins") is None


# --- the namespace's listing ------------------------------------------------------------------------
def test_docs_lists_the_namespace_as_a_table_and_as_json(docs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["docs", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["namespace"] == "default" and {d["doc_id"] for d in listing["documents"]} == set(docs)
    first = next(d for d in listing["documents"] if d["title"] == "Pumps")
    assert set(first) == {"doc_id", "title", "source", "words", "chunks", "embedder", "ingested_at"}
    assert first["source"].endswith("pumps.md") and first["embedder"] == get_store().space
    assert first["words"] == count_words(Path(first["source"]).read_text(encoding="utf-8")) > 500
    assert first["chunks"] == get_document("default", first["doc_id"]).chunks > 1
    assert first["ingested_at"].endswith("Z")
    assert main(["docs"]) == 0
    table = capsys.readouterr().out
    assert "Pumps" in table and "Otters" in table and "3 documents" in table
    assert main(["docs", "-n", "empty"]) == 0 and "no documents" in capsys.readouterr().out


def test_words_are_counted_as_a_reader_counts_them() -> None:
    assert count_words("Otters hold hands.\n\nThey sleep") == 5
    assert count_words("水獭睡觉时 hold hands") == 7
    assert count_words("# Title\n\n- one - two") == 3


def test_an_old_record_without_words_or_time_still_lists_them(docs: list[str]) -> None:
    from stores.documents import doc_dir

    meta = doc_dir("default", docs[0]) / "meta.json"
    record = json.loads(meta.read_text())
    record.pop("words"), record.pop("ingested_at")
    meta.write_text(json.dumps(record))
    row = next(r for r in document_listing("default") if r["doc_id"] == docs[0])
    assert row["words"] > 100 and row["ingested_at"].endswith("Z")


# --- summaries and chat across documents ---------------------------------------------------------
def test_a_summary_of_a_folder_cites_document_and_sentence(tmp_path: Path) -> None:
    from doubles.replies import summarize_chat_model
    from graphs.summarize.graph import graph
    from stores.models import use_chat_model

    folder = tmp_path / "reports"
    write_docs(folder, ("pumps.md", "otters.md"))
    context = SummarizeContext(chunk_size=120, chunk_overlap=20, max_rounds=1)
    with use_chat_model(summarize_chat_model()):
        out = graph.invoke({"path": str(folder), "query": "what did sea otters eat", "length": 60}, context=context)
    names = {d["tag"]: d["title"] for d in out["documents"]}
    assert sorted(names.values()) == ["Otters", "Pumps"]
    cited = [c for s in out["sentences"] for c in s["citations"]]
    assert cited and all(split_label(c)[0] in names for c in cited)
    for sentence in out["sentences"]:
        for source in sentence["sources"]:
            tag, label = split_label(source["label"])
            assert tag in names and source["document"] == names[tag] and "." in label  # chunk and sentence
    assert any(c.startswith(f"{next(t for t, n in names.items() if n == 'Otters')}:") for c in cited)


def test_chat_over_a_collection_cites_documents_and_takes_other_ones_with_their_tags(docs: list[str]) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from doubles.replies import offload_chat_model
    from graphs.offload.graph import builder
    from stores.models import use_chat_model

    chat = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "c1"}}
    context = {"chunk_size": 120, "chunk_overlap": 20, "policy": "offload_canvas"}
    with use_chat_model(offload_chat_model()):
        ask = {"question": "How many urchins did sea otter 7 eat?", "doc_ids": docs}
        first = chat.invoke(ask, config, context=context)
        assert [d["tag"] for d in first["documents"]] == [1, 2, 3]
        assert first["citations"] and all(split_label(c)[0] in (1, 2, 3) for c in first["citations"])
        meta = first["messages"][-1].additional_kwargs["longdoc"]
        cited = [s for s in meta["sources"] if s["cited"]]
        assert list(dict.fromkeys(s["chunk_id"] for s in cited)) == first["citations"]
        assert all(s["label"].startswith(s["chunk_id"] + ".") for s in meta["sources"])  # the sentence: 2:c1.3
        titles = {d["tag"]: d["title"] for d in first["documents"]}
        assert all(s["title"] == titles[split_label(s["chunk_id"])[0]] for s in meta["sources"])
        assert f"[{meta['sources'][0]['label']}] {meta['sources'][0]['title']}: " in first["messages"][-1].content
        assert first["canvas"]["source"] == "collection"
        second = chat.invoke({"question": "What did the board approve for batch 5?"}, config, context=context)
        assert second["turn"] == 2 and second["documents"] == first["documents"]
        # a turn naming other documents reads them, each with the tag the thread gave it
        third = chat.invoke(
            {"question": "How many urchins did otter 7 eat?", "doc_ids": docs[1:]}, config, context=context
        )
        assert third["turn"] == 3 and third["documents"] == first["documents"][1:]
        assert third["citations"] and all(split_label(c)[0] in (2, 3) for c in third["citations"])
        meta = third["messages"][-1].additional_kwargs["longdoc"]
        assert all(s["title"] == titles[split_label(s["chunk_id"])[0]] for s in meta["sources"]) and meta["sources"]
        assert third["canvas"]["source"] == "collection" and third["canvas"]["id"] != first["canvas"]["id"]
    from nodes.offload.collection_canvas import session_canvas

    drawn = session_canvas(Sources(get_store(), docs[1:], chat.get_state(config).values["tags"]), 6)
    assert drawn.record_id == third["canvas"]["id"]
    assert [n.label for n in drawn.spec.nodes if n.kind == "section"] == [f"[2] {titles[2]}", f"[3] {titles[3]}"]


def test_the_collection_canvas_puts_the_documents_on_top(docs: list[str]) -> None:
    from nodes.offload.collection_canvas import session_canvas

    sources = Sources(get_store(), docs)
    canvas = session_canvas(sources, 6)
    top = [n for n in canvas.spec.nodes if n.kind == "section"]
    assert [n.label for n in top] == ["[1] Pumps", "[2] Otters", "[3] Budget"]
    children = [n for n in canvas.spec.nodes if n.kind != "section"]
    assert len(canvas.spec.nodes) == 6 and len(children) == 3
    assert {e.source for e in canvas.spec.edges} == {"d1", "d2", "d3"}  # one section of each document first
    assert all(sources.locate(c) is not None for n in canvas.spec.nodes for c in n.chunk_ids)
    small = session_canvas(sources, 2)
    assert [n.label for n in small.spec.nodes] == ["[1] Pumps", "+2 more documents"]


def _drawn_canvas(doc_id: str) -> Any:
    """A model-drawn canvas of ``doc_id`` (two nodes and a relation), stored as the canvas writer stores one."""
    from nodes.canvas_render import CanvasEdge, CanvasNode, CanvasSpec, render_mermaid
    from nodes.offload.canvas import Canvas, save_canvas
    from stores.documents import index_identity

    nodes = [
        CanvasNode(id="n1", label="Solar pump", kind="entity", chunk_ids=["c0"]),
        CanvasNode(id="n2", label="Drip lines", kind="entity", chunk_ids=["c0"]),
    ]
    spec = CanvasSpec(title="Pumps", nodes=nodes, edges=[CanvasEdge(source="n1", target="n2", label="feeds")])
    info = get_document("default", doc_id)
    canvas = Canvas(doc_id, "Pumps", spec, render_mermaid(spec), "llm", index=index_identity(info))
    save_canvas(get_store(), canvas)
    return canvas


@pytest.mark.parametrize("collection", [False, True], ids=["one document", "collection"])
def test_a_session_canvas_composes_its_documents_drawn_canvases(docs: list[str], collection: bool) -> None:
    """Drawn nodes keep their relations; a document is headed where labels carry its tag; no part goes undrawn."""
    from nodes.offload.collection_canvas import session_canvas

    sources = Sources(get_store(), docs if collection else docs[:1])
    asked: list[str] = []

    def draw(doc_id: str) -> Any:
        asked.append(doc_id)
        return _drawn_canvas(doc_id)

    before = session_canvas(sources, 8)
    made = session_canvas(sources, 8, draw)
    assert asked == ([] if collection else docs[:1])  # only a part that is the whole map is worth a drawing
    assert (before is None) != collection
    drawn = _drawn_canvas(docs[0])
    made = session_canvas(sources, 8)
    assert made is not None
    if not collection:  # the document's own canvas, as the model drew it
        assert made.spec == drawn.spec and made.map_text() == drawn.map_text() and made.source == "llm"
        return
    labels = {n.id: n.label for n in made.spec.nodes}
    assert labels["d1"] == "[1] Pumps" and labels["d1-n1"] == "Solar pump" and labels["d2"] == "[2] Otters"
    assert next(n for n in made.spec.nodes if n.id == "d1-n1").chunk_ids == ["1:c0"]
    relations = {(e.source, e.target, e.label) for e in made.spec.edges}
    assert {("d1", "d1-n1", ""), ("d1-n1", "d1-n2", "feeds")} <= relations
    assert "-> " in made.map_text() and ": feeds" in made.map_text() and made.source == "collection"


# --- tenants ------------------------------------------------------------------------------------------
KEYS = {"team-a": "key-a", "team-b": "key-b"}


def test_served_callers_name_only_their_own_documents_and_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doubles.replies import summarize_chat_model
    from surfaces.serve import create_app

    root = tmp_path / "root"
    write_docs(root / "reports", ("pumps.md", "otters.md"))
    write_docs(tmp_path / "elsewhere", ("budget.md",))
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    theirs = ingest(text="# Secret\n\nThe launch code of Project Heron is 7-ALPHA-9.", namespace="team-b").doc_id
    a, b = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
    with TestClient(create_app(chat_model=summarize_chat_model())) as client:
        refused = client.post("/summarize/invoke", json={"input": {"doc_ids": [theirs], "length": 30}}, headers=a)
        assert refused.status_code == 400 and "not ingested in namespace 'team-a'" in refused.json()["detail"]
        assert "7-ALPHA-9" not in refused.text
        outside = client.post("/summarize/invoke", json={"input": {"path": "../elsewhere", "length": 30}}, headers=a)
        assert outside.status_code == 400
        assert outside.json()["detail"] == "no readable file '../elsewhere' under the ingest root"
        ok = client.post(
            "/summarize/invoke",
            json={"input": {"path": "reports", "length": 30}, "config": {"configurable": {"chunk_size": 120}}},
            headers=a,
        )
        assert ok.status_code == 200, ok.text
        assert sorted(d["title"] for d in ok.json()["output"]["documents"]) == ["Otters", "Pumps"]
        listed = client.get("/documents", headers=a).json()
        assert listed["namespace"] == "team-a"
        assert sorted(d["title"] for d in listed["documents"]) == ["Otters", "Pumps"]
        assert [d["doc_id"] for d in client.get("/documents", headers=b).json()["documents"]] == [theirs]
        assert client.get("/documents?namespace=team-b", headers=a).status_code == 403
        assert client.get("/documents").status_code == 401


def test_the_scale_out_app_lists_only_the_callers_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    from deploy import app as deployed
    from deploy.auth import keyring

    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    keyring.cache_clear()
    mine = ingest(text="# Pumps\n\nThe pump team tested well 3.", namespace="team-a").doc_id
    ingest(text="# Secret\n\nThe launch code is 7-ALPHA-9.", namespace="team-b")
    try:
        client = TestClient(deployed.app)
        own = client.get("/documents", headers={"X-API-Key": "key-a"})
        assert own.status_code == 200 and [d["doc_id"] for d in own.json()["documents"]] == [mine]
        foreign = client.get("/documents?namespace=team-b", headers={"X-API-Key": "key-a"})
        assert foreign.status_code == 403 and "7-ALPHA-9" not in foreign.text
        assert client.get("/documents").status_code == 401
    finally:
        keyring.cache_clear()


# --- the chain's shortlist over a collection -----------------------------------------------------------
def test_a_shortlist_reads_a_repeated_paragraph_once_and_keeps_its_numbers_when_it_grows(tmp_path: Path) -> None:
    from nodes.chain.pool import grown, pool_documents, pool_tags, reading_of, shortlist

    shared = "The shared paragraph says that the well pump of Nakuru runs on solar power."
    texts = {
        "a.md": f"# Alpha\n\n{shared}\n\nAlpha notes that otters sleep holding hands.",
        "b.md": f"# Beta\n\n{shared}\n\nBeta notes that the board approved 40,000 euros.",
    }
    docs = []
    for name, text in texts.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        docs.append(ingest(str(path)).doc_id)
    store = get_store()
    pool = shortlist(store, docs, "Nakuru well pump solar power", 2)
    assert len(pool) == 2 and set(pool_tags(pool)) == set(docs)
    reading = reading_of(store, pool, documents=docs, passage_tokens=200, chunk_tokens=1200)
    texts_read = [p.text for p in reading.passages.passages]
    assert sum(shared in t for t in texts_read) == 1  # the paragraph both documents hold is read once
    assert all(label.split(":")[0] in ("1", "2") for label in reading.doc.chunk_ids)
    assert reading.tree.n == 2 and reading.passages.passages[0].labels[0].startswith(reading.doc.chunk_ids[0])
    documents = pool_documents("default", pool)
    assert [d["tag"] for d in documents] == [1, 2] and {d["title"] for d in documents} == {"Alpha", "Beta"}
    assert grown(pool, [pool[1], "x:y:c0"]) == [*pool, "x:y:c0"]
    with pytest.raises(InputError, match="changed during the run"):
        reading_of(store, [*pool, f"{docs[0]}:gone:c9"], documents=docs, passage_tokens=200, chunk_tokens=1200)


def test_the_shortlist_grows_for_the_missing_piece_and_the_entity_the_best_quote_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodes.chain import planner
    from nodes.chain.context import ChainContext

    asked: list[str] = []
    monkeypatch.setattr(planner, "shortlist", lambda store, collection, query, size, indexes: asked.append(query) or [])
    state: Any = {
        "question": "Who directed the film shot in Leland, North Carolina in 1986?",
        "pool": ["d1:i:c0"],
        "shortlisted": True,
        "collection": ["d1", "d2"],
        "missing": "the director of that film",
        "current": '[1:c0.4] The film "Maximum Overdrive" was shot in Leland in 1986.\n[1:c0.5] Leland is small.',
    }
    assert planner._grown(get_store(), state, ChainContext()) == {"expanded": ["the director of that film"]}
    assert asked[-1] == "the director of that film maximum overdrive"
    planner._grown(get_store(), state, ChainContext(bridges="never"))
    assert asked[-1] == "the director of that film"
    assert planner._grown(get_store(), {**state, "expanded": [state["missing"]]}, ChainContext()) == {}
    assert len(asked) == 2  # a piece already searched for is not searched again
    whole = {**state, "shortlisted": False}  # a run that reads every chunk: nothing to grow, no bridge by default
    assert planner._grown(get_store(), {**whole, "missing": "the producer"}, ChainContext()) == {}
    assert planner.sought(whole, ChainContext(), "the director", state["current"]) == "the director"
    always = ChainContext(bridges="always")
    assert planner.sought(whole, always, "the director", state["current"]) == "the director maximum overdrive"
    assert planner.sought(state, ChainContext(), "", state["current"]) == ""  # nothing missing: the question alone


# --- ask across documents ------------------------------------------------------------------------------
def _chain_model(manager_evidence: str) -> Any:
    from doubles.chat import ScriptedChatModel
    from tests.fakes import quoting

    manager = json.dumps(
        {"answer": "7 urchins", "evidence": [manager_evidence], "explanation": f"It ate 7 [{manager_evidence}]."}
    )
    worker = quoting([("urchins", "the board approval in March"), ("board", "")], otherwise="sea otters")
    return ScriptedChatModel(rules=[("manager of a chain", manager)], default=worker)


def test_ask_reads_a_shortlist_of_a_large_collection_within_the_budget_and_names_each_document(
    docs: list[str],
) -> None:
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext
    from stores.models import use_chat_model
    from stores.text import count_tokens

    model = _chain_model("1:c1.3")
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "How many urchins did sea otter 7 eat?", "doc_ids": docs},
            context=ChainContext(shortlist=4, whole_max=4, chunk_size=120, chunk_overlap=20),
        )
    assert len(out["tree"]) + 1 < sum(len(get_store().by_doc(d)) for d in docs)  # a tree over a shortlist
    titles = {d["tag"]: d["title"] for d in out["documents"]}
    assert titles[1] == "Otters"  # tags follow the shortlist: the question's best matches come first
    assert out["citations"] == ["1:c1"] and out["answer"] == "7 urchins"
    assert all(split_label(span.rsplit("-", 1)[0])[0] in titles for span in out["passages"])
    workers = [c for c in model.calls if "manager of a chain" not in str(c[0].content)]
    assert len(workers) == 2 and "[1:c1.3] Sea otter 7 ate 7 urchins" in str(workers[0][-1].content)
    # the first worker named a missing piece: the budget's chunks joined the shortlist and the second worker read them
    assert "Budget" in titles.values() and "board approved" in str(workers[1][-1].content)
    shown = sum(count_tokens(str(c[-1].content).split("Passages:")[-1]) for c in workers)
    assert shown <= ChainContext().budget + 200  # the budget bounds what is read, whatever the collection's size
    assert out["tree"] and all(split_label(a)[0] and split_label(b)[0] for a, b, _ in out["tree"])


def test_a_collection_of_one_runs_as_its_document(docs: list[str]) -> None:
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext
    from stores.models import use_chat_model

    context = ChainContext(chunk_size=120, chunk_overlap=20)
    with use_chat_model(_chain_model("c1.3")):
        one = graph.invoke({"question": "How many urchins did sea otter 7 eat?", "doc_ids": docs[1:2]}, context=context)
    with use_chat_model(_chain_model("c1.3")):
        alone = graph.invoke({"question": "How many urchins did sea otter 7 eat?", "doc_id": docs[1]}, context=context)
    assert one["documents"] == alone["documents"] and [d["doc_id"] for d in one["documents"]] == docs[1:2]
    assert one["doc_id"] == alone["doc_id"] == docs[1]
    assert {k: one[k] for k in ("passages", "citations", "tree")} == {
        k: alone[k] for k in ("passages", "citations", "tree")
    }


def test_a_small_collection_is_read_whole_as_one_document_is(docs: list[str]) -> None:
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext
    from stores.models import use_chat_model

    model = _chain_model("2:c1.3")
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "How many urchins did sea otter 7 eat?", "doc_ids": docs},
            context=ChainContext(chunk_size=120, chunk_overlap=20),
        )
    every = [h.chunk_id for d in docs for h in get_store().by_doc(d)]
    assert len(out["tree"]) == len(every) - 1  # one tree over every chunk of the documents
    assert [d["doc_id"] for d in out["documents"]] == docs and [d["tag"] for d in out["documents"]] == [1, 2, 3]
    assert out["citations"] == ["2:c1"] and out["answer"] == "7 urchins" and out["doc_id"] == ""
    assert out["tree"] and {split_label(a)[0] for a, _, _ in out["tree"]} == {1, 2, 3}  # one tree over all of them
    workers = [c for c in model.calls if "manager of a chain" not in str(c[0].content)]
    assert "[2:c1.3] Sea otter 7 ate 7 urchins" in str(workers[0][-1].content)


@pytest.mark.parametrize("context", [{"order": "original"}, {"read_all": True}])
def test_a_fixed_order_reads_a_collection_read_whole_and_a_shortlist_is_read_best_first(
    docs: list[str], context: dict[str, Any]
) -> None:
    from graphs.chain.graph import graph
    from stores.models import use_chat_model

    with use_chat_model(_chain_model("1:c1.3")):
        out = graph.invoke({"question": "What did the board approve?", "doc_ids": docs}, context=context)
    read_docs = {split_label(c)[0] for chain in out["order"] for c in chain}
    assert read_docs == {1, 2, 3} if context.get("read_all") else read_docs <= {1, 2, 3}
    if context.get("order") == "original":  # the documents' order, each in its own order
        order = out["order"][0]
        assert order == sorted(order, key=lambda c: (split_label(c)[0], int(split_label(c)[1][1:])))
    if not context.get("read_all"):  # a shortlist cannot be read in a fixed order
        with use_chat_model(_chain_model("1:c1.3")), pytest.raises(InputError, match="read best-first"):
            graph.invoke(
                {"question": "What did the board approve?", "doc_ids": docs}, context={**context, "whole_max": 4}
            )


def test_ask_on_the_command_line_names_the_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stores.models import use_chat_model

    folder = tmp_path / "reports"
    write_docs(folder)
    page = tmp_path / "tree.html"
    with use_chat_model(_chain_model("2:c1.3")):
        assert (
            main(
                [
                    "ask",
                    str(folder),
                    "How many urchins did sea otter 7 eat?",
                    "-q",
                    "--no-stream",
                    "--chunk-size",
                    "120",
                    "--tree-html",
                    str(page),
                ]
            )
            == 0
        )
    text = capsys.readouterr().out
    assert "citations: 2:c1" in text and "documents:\n  [2] Otters (" in text and "otters.md)" in text
    drawn = page.read_text(encoding="utf-8")
    # the tree's nodes show their chunks' words (":" written as Mermaid's #58;) and name their document on hover
    assert "2#58;c1 · Sea otter" in drawn and "&quot;2:c1 · Otters" in drawn
    with use_chat_model(_chain_model("2:c1.3")):
        assert main(["ask", "How many urchins did sea otter 7 eat?", "--json", "--chunk-size", "120"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["citations"] == ["2:c1"] and {d["title"] for d in out["documents"]} >= {"Otters"}


def test_the_scale_out_guard_keeps_a_folder_inside_the_ingest_root(tmp_path: Path) -> None:
    from deploy import app as guard
    from surfaces.access import IngestRoot, Tenant

    root = tmp_path / "root"
    write_docs(root / "reports", ("pumps.md",))
    write_docs(tmp_path / "elsewhere", ("otters.md",))
    files, tenant = IngestRoot(root), Tenant("team-a", ("team-a",))
    guard._owners.cache_clear()
    checked = guard.check_run(
        {"assistant_id": "chain", "input": {"question": "?", "path": "reports"}}, "t1", tenant, files
    )
    assert checked["input"]["path"] == str((root / "reports").resolve()) and checked["context"]["namespace"] == "team-a"
    for outside in ("../elsewhere", str(tmp_path / "elsewhere")):
        with pytest.raises(guard.Refused) as refused:
            guard.check_run({"assistant_id": "chain", "input": {"question": "?", "path": outside}}, "t2", tenant, files)
        assert (
            refused.value.status == 400 and str(refused.value) == f"no readable file {outside!r} under the ingest root"
        )
    guard._owners.cache_clear()
