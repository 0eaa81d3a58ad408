"""The Chroma store, run over both backends: the local directory and a Chroma server (``chroma run``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stores.documents import DocumentInfo, document_text, get_document, list_documents, save_document
from stores.errors import InputError
from stores.vectorstore import Record, VectorStore, check_namespace, get_store, reset_stores
from tests.backends import backend, chroma_url

__all__ = ["backend", "chroma_url"]  # fixtures


def _records(doc_id: str, texts: list[str]) -> list[Record]:
    return [
        Record(id=f"{doc_id}:c{i}", text=t, kind="chunk", doc_id=doc_id, chunk_id=f"c{i}", position=i, section="S")
        for i, t in enumerate(texts)
    ]


def test_add_search_get_by_doc() -> None:
    store = get_store("alpha")
    texts = ["cats purr and sleep", "the budget was approved", "rockets fly to the moon"]
    assert store.add(_records("d1", texts), batch_size=2) == 3
    hits = store.search("who approved the budget", k=2, doc_id="d1")
    assert hits[0].chunk_id == "c1"
    assert hits[0].score > hits[1].score
    assert [h.position for h in store.by_doc("d1")] == [0, 1, 2]
    got = store.get(["d1:c2", "missing", "d1:c0"], with_embeddings=True)
    assert [h.id for h in got] == ["d1:c2", "d1:c0"]
    assert got[0].embedding is not None and len(got[0].embedding) == 256
    assert store.count(doc_id="d1", kind="chunk") == 3
    assert store.search("anything", kind="canvas") == []


def test_min_score_filters_weak_matches() -> None:
    store = get_store("alpha")
    store.add(_records("d1", ["cats purr", "dogs bark"]))
    assert store.search("zebra quantum", k=5, min_score=0.5) == []


def test_namespaces_are_isolated() -> None:
    a, b = get_store("tenant-a"), get_store("tenant-b")
    a.add(_records("d1", ["secret plans of tenant a"]))
    assert b.count() == 0
    assert b.search("secret plans") == []
    assert a.collection_name != b.collection_name


def test_records_survive_a_new_client() -> None:
    get_store("persist").add(_records("d9", ["persistent text"]))
    reset_stores()
    fresh = VectorStore("persist", "hash")
    assert fresh.count(doc_id="d9") == 1
    assert fresh.search("persistent text")[0].id == "d9:c0"


def test_delete_by_doc_and_kind() -> None:
    store = get_store()
    store.add(_records("d1", ["one", "two"]) + _records("d2", ["three"]))
    store.add([Record(id="d1:canvas", text="graph TD", kind="canvas", doc_id="d1")])
    store.delete(doc_id="d1", kind="chunk")
    assert store.count(doc_id="d1", kind="chunk") == 0
    assert store.count(doc_id="d1", kind="canvas") == 1
    assert store.count(doc_id="d2") == 1


@pytest.mark.parametrize("bad", ["", "has space", "x" * 64, "../etc", "-lead"])
def test_invalid_namespaces(bad: str) -> None:
    with pytest.raises(InputError):
        check_namespace(bad)


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(InputError):
        get_store().add([Record(id="x", text="t", kind="weird", doc_id="d")])


def test_the_document_registry_is_shared_through_a_server(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one process (its own LONGDOC_HOME) ingested, another sees only through a Chroma server."""
    info = DocumentInfo("abc123", "team", "Title", "t.md", "text/markdown", "en", 2, ["Intro"], "hash", 60, 10)
    monkeypatch.setenv("LONGDOC_HOME", str(tmp_path / "first"))
    save_document(info, "Full text.")
    assert get_document("team", "abc123") == info and document_text("team", "abc123") == "Full text."
    monkeypatch.setenv("LONGDOC_HOME", str(tmp_path / "second"))
    reset_stores()
    if backend == "server":
        assert get_document("team", "abc123") == info
        assert document_text("team", "abc123") == "Full text."
        assert list_documents("team") == [info] and list_documents("other") == []
    else:
        assert list_documents("team") == []
        with pytest.raises(InputError):
            get_document("team", "abc123")


def test_a_filtered_search_asks_for_at_most_k_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    store = get_store("default")
    store.add(
        [Record(id=f"d:c{i}", text=f"chunk {i} about pumps", kind="chunk", doc_id="d", position=i) for i in range(30)]
    )
    asked: list[dict] = []
    get = store.collection.get

    def spy(*args: object, **kwargs: object) -> dict:
        asked.append(dict(kwargs))
        return get(*args, **kwargs)

    monkeypatch.setattr(store.collection, "get", spy)
    monkeypatch.setattr(store, "count", lambda **_: pytest.fail("search counted every record"))
    hits = store.search("pumps", k=3, doc_id="d")
    assert len(hits) == 3
    assert asked and all(a.get("limit") == 3 for a in asked)
    assert store.search("pumps", k=5, doc_id="nothing") == []
