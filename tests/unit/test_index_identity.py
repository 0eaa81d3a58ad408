"""Index identity: what is derived from a document's chunks follows (content hash, chunker settings, embedder).

Re-ingesting the same text with other chunk settings keeps the ``doc_id`` but renumbers the chunks;
every cache derived from them (Chow-Liu tree, canvas, expert answers, BM25 index, a chat session's
``[cN]`` citations) must then miss or refuse, and an identical re-ingest must still hit.
"""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_chat_model
from graphs.offload.graph import builder as offload_builder
from nodes.chain.orderer import cached_tree, document_vectors
from nodes.ingest import ingest
from nodes.offload.canvas import load_canvas
from nodes.offload.canvas_writer import ensure_canvas
from nodes.retrieval import lexical_index
from stores.documents import get_document, index_identity
from stores.errors import InputError
from stores.models import LLM, use_chat_model
from stores.vectorstore import get_store

TEXT = "# Herons\n\n" + "\n\n".join(
    f"Paragraph {i}: herons wait very still in shallow water near reed beds for small fish." for i in range(12)
)
FIRST = {"chunk_size": 80, "chunk_overlap": 0}
OTHER = {"chunk_size": 100, "chunk_overlap": 30}
"""Both cut TEXT into four chunks c0-c3, with other text behind the same ids."""
CANVAS = {
    "title": "Herons",
    "nodes": [{"id": "n1", "label": "Herons waiting", "kind": "entity", "chunk_ids": ["c1"]}],
    "edges": [],
}


def reingest(settings: dict[str, int]) -> str:
    return ingest(text=TEXT, **settings).doc_id


def chunk_texts(doc_id: str) -> list[str]:
    return [h.text for h in get_store().by_doc(doc_id)]


@pytest.fixture
def doc_id() -> str:
    return reingest(FIRST)


def test_the_identity_follows_chunking_and_embedder_not_an_identical_reingest(doc_id: str) -> None:
    first = get_document("default", doc_id)
    before = chunk_texts(doc_id)
    assert reingest(FIRST) == doc_id and index_identity(get_document("default", doc_id)) == index_identity(first)
    assert reingest(OTHER) == doc_id
    other = get_document("default", doc_id)
    assert other.chunks == first.chunks == 4 and chunk_texts(doc_id) != before  # same ids, other text
    assert index_identity(other) != index_identity(first)
    assert index_identity(other) != index_identity(type(other)(**{**other.to_dict(), "embedder": "other"}))


def test_chow_liu_tree_cache_follows_the_index(doc_id: str) -> None:
    store = get_store()
    assert cached_tree(store, document_vectors(store, doc_id))[1] is False
    reingest(FIRST)
    assert cached_tree(store, document_vectors(store, doc_id))[1] is True  # identical re-ingest: a hit
    reingest(OTHER)
    doc = document_vectors(store, doc_id)
    tree, cached = cached_tree(store, doc)
    assert cached is False and tree.n == len(doc.chunk_ids)  # same chunk count, rebuilt from the new chunks
    assert cached_tree(store, document_vectors(store, doc_id))[1] is True


def test_canvas_cache_follows_the_index(doc_id: str) -> None:
    store = get_store()
    fake = ScriptedChatModel(default=json.dumps(CANVAS))
    with use_chat_model(fake):
        made, cached = ensure_canvas(store, get_document("default", doc_id), LLM("offloader"))
        assert cached is False and made.index == index_identity(get_document("default", doc_id))
        reingest(FIRST)
        _, cached = ensure_canvas(store, get_document("default", doc_id), LLM("offloader"))
        assert cached is True and len(fake.calls) == 1  # identical re-ingest: no canvas call
        reingest(OTHER)
        assert load_canvas(store, doc_id) is None  # its c1 now names other text
        again, cached = ensure_canvas(store, get_document("default", doc_id), LLM("offloader"))
    assert cached is False and len(fake.calls) == 2
    assert again.index == index_identity(get_document("default", doc_id)) != made.index
    assert load_canvas(store, doc_id) is not None


def test_a_chat_session_refuses_a_turn_after_its_document_is_reindexed(doc_id: str) -> None:
    graph = offload_builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "herons"}}
    context = {"policy": "offload"}
    with use_chat_model(offload_chat_model()):
        first = graph.invoke({"question": "Where do herons wait?", "doc_id": doc_id}, config=config, context=context)
        assert first["citations"] == ["c0"]
        reingest(FIRST)
        second = graph.invoke({"question": "What do herons eat?"}, config=config, context=context)
        assert second["turn"] == 2  # identical re-ingest: the history's chunk ids still hold
        reingest(OTHER)
        with pytest.raises(InputError, match="indexed again with other chunk settings"):
            graph.invoke({"question": "What do herons eat?"}, config=config, context=context)
        reingest(FIRST)  # the session's own index again: its citations name the same text
        third = graph.invoke({"question": "Where do herons wait?"}, config=config, context=context)
    assert third["turn"] == 3 and third["doc_id"] == doc_id


def test_bm25_index_follows_the_index(doc_id: str) -> None:
    store = get_store()
    first_bm25 = lexical_index(store, doc_id)
    reingest(FIRST)
    assert lexical_index(store, doc_id) is first_bm25
    reingest(OTHER)
    again = lexical_index(store, doc_id)
    assert again is not first_bm25 and [h.text for h in again.hits] == chunk_texts(doc_id)


def test_summarize_reuses_expert_answers_only_on_the_same_index(doc_id: str) -> None:
    from doubles.replies import summarize_chat_model
    from graphs.summarize.graph import graph as summarize

    def cached_answers() -> list[bool]:
        with use_chat_model(summarize_chat_model()):
            out = summarize.invoke({"doc_id": doc_id, "length": 40}, context={"max_rounds": 1})
        return [bool(q["cached"]) for r in out["log"] for q in r["questions"]]

    first = cached_answers()
    assert first and not any(first)
    reingest(FIRST)
    assert all(cached_answers())  # identical re-ingest: every answer from the cache
    reingest(OTHER)
    assert not any(cached_answers())  # the cached answers cite chunk ids that now name other text
