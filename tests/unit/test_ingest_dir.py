"""Ingesting a directory (progress, unchanged files skipped, resume) and the embed/write pipeline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nodes.ingest import chunk_records, embed_records, index_document, read_source
from nodes.ingest_dir import document_files, ingest_directory
from stores.chunking import chunk_text
from stores.errors import InputError
from stores.vectorstore import VectorStore, get_store
from tests.unit.test_ingest import CountingEmbeddings

PARAGRAPH = "The pump team met on {day}. They checked panel {n} and wrote down the flow of the well. "


def _write(path: Path, title: str, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n\n".join(PARAGRAPH.format(day=title, n=i) * 3 for i in range(n))
    path.write_text(f"# {title}\n\n{body}\n")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    _write(root / "a.md", "Monday", 6)
    _write(root / "sub" / "b.txt", "Tuesday", 4)
    _write(root / ".hidden" / "c.md", "Secret", 2)
    (root / "notes.csv").write_text("x,y\n")
    return root


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> CountingEmbeddings:
    counting = CountingEmbeddings()
    monkeypatch.setattr("stores.vectorstore.get_embedder", lambda name=None: counting)
    return counting


def test_document_files_lists_supported_visible_files(folder: Path) -> None:
    assert [p.relative_to(folder).as_posix() for p in document_files(folder)] == ["a.md", "sub/b.txt"]
    with pytest.raises(InputError, match="not a directory"):
        document_files(folder / "a.md")


def test_directory_ingest_reports_progress_and_skips_unchanged_files(
    folder: Path, counter: CountingEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nodes.ingest_dir

    read: list[str] = []
    real = nodes.ingest_dir.load_path
    monkeypatch.setattr(nodes.ingest_dir, "load_path", lambda path, enc=None: read.append(path.name) or real(path, enc))
    events: list[dict[str, Any]] = []
    first = ingest_directory(folder, chunk_size=60, chunk_overlap=10, progress=events.append)
    assert [Path(i["path"]).name for i in first.indexed] == ["a.md", "b.txt"]
    assert not first.skipped and not first.failed
    chunks = sum(i["chunks"] for i in first.indexed)
    assert counter.embedded == chunks > 4
    files = [e for e in events if e["stage"] == "files"]
    assert (files[0]["done"], files[-1]["done"], files[-1]["total"]) == (0, 2, 2)
    embeds = [e for e in events if e["stage"] == "embed"]
    assert embeds and all(e["done"] <= e["total"] for e in embeds)

    # unchanged files are neither read nor embedded again
    again = ingest_directory(folder, chunk_size=60, chunk_overlap=10)
    assert [Path(i["path"]).name for i in again.skipped] == ["a.md", "b.txt"]
    assert counter.embedded == chunks and again.to_dict()["chunks"] == chunks
    assert read == ["a.md", "b.txt"]

    # an edited file is ingested again, the other one is not
    changed = _write(folder / "sub" / "b.txt", "Wednesday", 4)
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    third = ingest_directory(folder, chunk_size=60, chunk_overlap=10)
    assert [Path(i["path"]).name for i in third.indexed] == ["b.txt"]
    assert [Path(i["path"]).name for i in third.skipped] == ["a.md"]
    assert read == ["a.md", "b.txt", "b.txt"]


def test_an_unreadable_file_is_reported_and_the_others_go_on(folder: Path, counter: CountingEmbeddings) -> None:
    (folder / "broken.pdf").write_bytes(b"not a pdf at all")
    result = ingest_directory(folder, chunk_size=60, chunk_overlap=10)
    assert [Path(i["path"]).name for i in result.failed] == ["broken.pdf"]
    assert "broken.pdf" in result.failed[0]["error"]
    assert len(result.indexed) == 2


class _Interrupted(Exception):
    pass


class FailingAfter(CountingEmbeddings):
    """Embeds ``budget`` texts, then fails (a run cut short)."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.embedded + len(texts) > self.budget:
            raise _Interrupted
        return super().embed_documents(texts)


def test_a_cut_short_ingest_resumes_without_reembedding(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "# Log\n\n" + "\n\n".join(PARAGRAPH.format(day="Friday", n=i) * 4 for i in range(40))
    doc = read_source(None, text, "Log")
    chunks = chunk_text(doc.text, chunk_size=60, chunk_overlap=10)
    assert len(chunks) > 32
    failing = FailingAfter(budget=32)  # two batches of 16 are written, the third fails
    with pytest.raises(_Interrupted):
        index_document(doc, VectorStore("resume", failing), chunk_size=60, chunk_overlap=10)
    store = VectorStore("resume", CountingEmbeddings())
    assert store.count(kind="chunk") == 32
    result = index_document(doc, store, chunk_size=60, chunk_overlap=10)
    assert result.chunks == len(chunks) and not result.cached
    assert store.embedder.embedded == len(chunks) - 32  # type: ignore[attr-defined]
    assert store.count(doc_id=result.doc_id, kind="chunk") == len(chunks)


def test_embed_records_writes_every_record_in_batches() -> None:
    embedder = CountingEmbeddings()
    store = VectorStore("batches", embedder)
    doc_id = "0123456789abcdef"
    paragraphs = [PARAGRAPH.format(day="Sunday", n=i) * 2 for i in range(10)]
    records = chunk_records(doc_id, chunk_text("\n\n".join(paragraphs), chunk_size=50, chunk_overlap=0), "i1")
    events: list[dict] = []
    assert embed_records(store, records, progress=events.append, done=3, total=len(records) + 3) == len(records) > 5
    assert embedder.embedded == len(records)
    assert store.count(doc_id=doc_id, kind="chunk", index="i1") == len(records)
    assert events[0]["done"] == 3 and events[-1]["done"] == events[-1]["total"] == len(records) + 3


def test_cli_ingests_a_directory(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces.cli import main

    assert main(["ingest", str(folder), "--quiet", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"files": 2' in out and '"failed": []' in out
    assert get_store().count(kind="chunk") > 0
