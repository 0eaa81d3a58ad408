from __future__ import annotations

from pathlib import Path

import pytest

from graphs.ingest import graph
from nodes.ingest import ingest
from stores.documents import document_text, get_document, list_documents
from stores.embedders import HashEmbeddings
from stores.errors import InputError
from stores.vectorstore import get_store


class CountingEmbeddings(HashEmbeddings):
    def __init__(self) -> None:
        super().__init__()
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


def test_graph_ingests_once_and_streams_progress(sample_markdown: Path) -> None:
    events = []
    final = {}
    for mode, chunk in graph.stream({"path": str(sample_markdown)}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    assert final["cached"] is False and final["chunks"] >= 1
    stages = [e["stage"] for e in events]
    assert stages[0] == "loaded" and "embed" in stages and stages[-1] == "indexed"
    again = graph.invoke({"path": str(sample_markdown)})
    one = {"doc_id": final["doc_id"], "chunks": final["chunks"], "cached": True, "title": "Project Falcon"}
    assert again == {**one, "documents": [{**one, "source": "sample.md"}], "superseded": []}
    info = get_document("default", final["doc_id"])
    assert info.sections == [
        "Project Falcon",
        "Project Falcon > Budget",
        "Project Falcon > Team",
        "Project Falcon > Schedule",
    ]
    assert "40,000 euros" in document_text("default", final["doc_id"])


def test_reingest_embeds_nothing(sample_markdown: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = CountingEmbeddings()
    monkeypatch.setattr("stores.vectorstore.get_embedder", lambda name=None: counter)
    first = ingest(str(sample_markdown), chunk_size=60, chunk_overlap=10)
    embedded = counter.embedded
    assert embedded == first.chunks > 1
    second = ingest(str(sample_markdown), chunk_size=60, chunk_overlap=10)
    assert (second.doc_id, second.cached, counter.embedded) == (first.doc_id, True, embedded)
    third = ingest(str(sample_markdown), chunk_size=120, chunk_overlap=10)
    assert third.cached is False and third.doc_id == first.doc_id
    assert get_store().count(doc_id=first.doc_id, kind="chunk") == third.chunks


def test_raw_text_and_namespace_from_input() -> None:
    out = graph.invoke({"text": "Raw text about otters. Otters hold hands.", "namespace": "zoo"})
    assert out["chunks"] == 1 and out["cached"] is False
    assert [d.doc_id for d in list_documents("zoo")] == [out["doc_id"]]
    assert list_documents("default") == []


@pytest.mark.parametrize(
    "payload",
    [
        {"path": "/definitely/missing.txt"},
        {"text": "   "},
        {},
        {"path": "x.txt", "text": "both"},
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(payload: dict[str, str]) -> None:
    store = get_store()
    before = store.count()
    with pytest.raises(InputError):
        graph.invoke(payload)
    assert store.count() == before
    assert list_documents("default") == []


def test_binary_file_leaves_store_unchanged(tmp_path: Path, sample_markdown: Path) -> None:
    ingest(str(sample_markdown))
    before = get_store().count()
    bad = tmp_path / "blob.txt"
    bad.write_bytes(b"\x00\x01\x02" * 500)
    with pytest.raises(InputError, match="binary"):
        graph.invoke({"path": str(bad)})
    assert get_store().count() == before
    assert len(list_documents("default")) == 1


def test_write_atomic_survives_concurrent_writers_of_one_path(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from stores.documents import write_atomic

    target = tmp_path / "docs" / "meta.json"
    payloads = [f'{{"writer": {i}, "pad": "{"x" * 20000}"}}' for i in range(40)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda text: write_atomic(target, text), payloads))
    assert target.read_text(encoding="utf-8") in payloads  # one whole write, never a mix
    assert [p.name for p in target.parent.iterdir()] == ["meta.json"]  # no temporary file left behind
    assert target.stat().st_mode & 0o777 == 0o644


def test_concurrent_ingests_of_one_text_all_succeed_with_one_copy() -> None:
    from concurrent.futures import ThreadPoolExecutor

    text = "# Herons\n\n" + "\n\n".join(f"Paragraph {i}: herons wait very still in shallow water." for i in range(30))
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda _i: graph.invoke({"text": text}, context={"chunk_size": 60}), range(24)))
    assert len({r["doc_id"] for r in results}) == 1
    doc_id, chunks = results[0]["doc_id"], max(r["chunks"] for r in results)
    assert all(r["chunks"] == chunks for r in results)
    assert get_store("default").count(doc_id=doc_id, kind="chunk") == chunks
    assert [d.doc_id for d in list_documents("default")] == [doc_id]
    assert document_text("default", doc_id).startswith("# Herons")


def test_graph_reads_parses_and_hashes_a_file_once(sample_markdown: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodes.ingest

    calls = {"read": 0, "hash": 0}
    read, digest = nodes.ingest.load_path, nodes.ingest.content_hash

    def counting_read(*args: object, **kwargs: object) -> object:
        calls["read"] += 1
        return read(*args, **kwargs)  # type: ignore[arg-type]

    def counting_hash(text: str) -> str:
        calls["hash"] += 1
        return digest(text)

    monkeypatch.setattr(nodes.ingest, "load_path", counting_read)
    monkeypatch.setattr(nodes.ingest, "content_hash", counting_hash)
    first = graph.invoke({"path": str(sample_markdown)})
    assert first["cached"] is False and calls == {"read": 1, "hash": 1}
    again = graph.invoke({"path": str(sample_markdown)})
    assert again["cached"] is True and calls == {"read": 2, "hash": 2}
