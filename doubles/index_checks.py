"""Checks of a document's index shared by the local-store and Chroma-server tests (tests/unit/test_index_integrity.py).

A document's index is whole or absent: its record's chunk count, the chunks readers see and the
chunk records stored all agree, and the chunks are those its recorded settings cut the text into.
Re-indexes are driven in other processes, killed with SIGKILL at chosen points.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nodes.chain.orderer import document_vectors
from nodes.ingest import ingest
from nodes.retrieval import hybrid_search
from stores.chunking import chunk_text, effective_overlap
from stores.documents import get_document
from stores.vectorstore import get_store

ROOT = Path(__file__).resolve().parents[1]
SIZES = (900, 300, 600, 900, 300, 600)
"""The six concurrent re-chunks of one document."""


def long_text(sections: int = 10, paragraphs: int = 30) -> str:
    """A markdown document that cuts into tens of chunks at 300 tokens, fewer at 600 and 900."""
    parts = []
    for s in range(sections):
        parts.append(f"## Section {s}\n")
        for p in range(paragraphs):
            parts.append(
                f"Paragraph {p} of section {s}: the committee reviewed the pump trials at site {s * 7 + p}, "
                f"noted a flow of {s + p} litres per minute, and asked the team in region {s % 5} to repeat "
                "the measurement after the rains, with the new filters and the longer hose.\n"
            )
    return "\n".join(parts)


def stored_chunks(namespace: str, doc_id: str) -> int:
    """Every chunk record of ``doc_id`` in the store, of any index (what readers do not filter away here)."""
    res = get_store(namespace).collection.get(where={"$and": [{"doc_id": doc_id}, {"kind": "chunk"}]}, include=[])
    return len(res["ids"])


def assert_whole(namespace: str, doc_id: str, text: str, *, leftovers: bool = False) -> Any:
    """The record, the chunks readers see and (unless ``leftovers``) the stored records agree; returns the record."""
    info = get_document(namespace, doc_id)
    store = get_store(namespace)
    expected = chunk_text(text, chunk_size=info.chunk_size, chunk_overlap=effective_overlap(info.chunk_size, 150))
    seen = store.by_doc(doc_id)
    assert [h.text for h in seen] == [c.text for c in expected], f"readers see another index than {info.chunk_size}"
    assert info.chunks == len(expected) == store.count(doc_id=doc_id, kind="chunk")
    assert len(document_vectors(store, doc_id).chunk_ids) == info.chunks
    assert {h.chunk_id for h in hybrid_search(store, doc_id, "pump trials filters", 50)} <= {h.chunk_id for h in seen}
    if not leftovers:
        assert stored_chunks(namespace, doc_id) == info.chunks
    return info


def ingest_in_threads(namespace: str, text: str, sizes: tuple[int, ...] = SIZES) -> list[Any]:
    """Ingest ``text`` once per chunk size, all at once in threads; returns results or exceptions.

    Embedding and storing take a few milliseconds a batch, as a real embedder's and a remote store's
    do, so the ingests overlap.
    """
    store = get_store(namespace)
    embedder, collection = store.embedder, store.collection
    embed, upsert = embedder.embed_documents, collection.upsert

    def slow_embed(texts: list[str]) -> list[list[float]]:
        time.sleep(0.005)
        return embed(texts)

    def slow_upsert(*args: Any, **kwargs: Any) -> None:
        upsert(*args, **kwargs)
        time.sleep(0.02)

    embedder.embed_documents = slow_embed  # type: ignore[method-assign]
    collection.upsert = slow_upsert
    barrier = threading.Barrier(len(sizes))
    out: list[Any] = [None] * len(sizes)

    def one(i: int) -> None:
        barrier.wait()
        try:
            out[i] = ingest(text=text, namespace=namespace, chunk_size=sizes[i])
        except Exception as exc:  # noqa: BLE001 - returned: the caller asserts none failed
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del embedder.embed_documents, collection.upsert
    return out


INGEST = """
import sys
from nodes.ingest import ingest
ingest(text=open(sys.argv[1], encoding="utf-8").read(), namespace=sys.argv[2], chunk_size=int(sys.argv[3]))
"""

KILLED = """
import os, signal, sys
import chromadb.api.models.Collection as collection
import stores.documents as documents
import stores.shared_files as shared_files
from nodes.ingest import ingest

point = sys.argv[4]
state = {"upserts": 0, "published": False}


def die():
    os.kill(os.getpid(), signal.SIGKILL)


upsert, delete = collection.Collection.upsert, collection.Collection.delete


def killing_upsert(self, ids, *args, **kwargs):
    metas = kwargs.get("metadatas") or []
    if metas and metas[0].get("kind") == "chunk":
        state["upserts"] += 1
        wanted = {"half-way": 1, "later": 2}.get(point)
        if state["upserts"] == wanted:
            half = len(ids) // 2
            upsert(self, ids[:half], **{k: v[:half] for k, v in kwargs.items()})
            die()
    return upsert(self, ids, *args, **kwargs)


def killing_delete(self, *args, **kwargs):
    if point == "cleanup" and state["published"]:
        die()
    return delete(self, *args, **kwargs)


write_atomic, put = documents.write_atomic, shared_files.SharedFiles.put


def killing_write(path, data):
    if path.name == "meta.json" and point == "publish":
        die()
    write_atomic(path, data)
    state["published"] |= path.name == "meta.json"


def killing_put(self, folder, name, text):
    if name == "meta.json" and point == "publish":
        die()
    put(self, folder, name, text)
    state["published"] |= name == "meta.json"


collection.Collection.upsert, collection.Collection.delete = killing_upsert, killing_delete
documents.write_atomic, shared_files.SharedFiles.put = killing_write, killing_put
ingest(text=open(sys.argv[1], encoding="utf-8").read(), namespace=sys.argv[2], chunk_size=int(sys.argv[3]))
"""
"""Re-indexes ``argv[1]`` at chunk size ``argv[3]``, killed with SIGKILL at ``argv[4]``: ``half-way`` (half of
the first batch of chunks written), ``later`` (half of the second), ``publish`` (just before the record is
written) or ``cleanup`` (the record written, the first delete after it)."""

KILL_POINTS = ("half-way", "later", "publish", "cleanup")


def run_python(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``script`` in a fresh interpreter from the project root, with this test's settings."""
    full = {**os.environ, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def ingest_in_processes(path: Path, namespace: str, sizes: tuple[int, ...] = SIZES) -> list[tuple[int, bytes]]:
    """Ingest the file at ``path`` once per chunk size, all at once in processes; returns (exit code, stderr)."""
    procs = [run_python(INGEST, str(path), namespace, str(size)) for size in sizes]
    return [(p.wait(timeout=600), p.communicate()[1]) for p in procs]


def kill_reindex(path: Path, namespace: str, size: int, point: str) -> int:
    """Re-index in a child process killed at ``point``; returns its exit code."""
    proc = run_python(KILLED, str(path), namespace, str(size), point)
    code = proc.wait(timeout=600)
    if code not in (0, -9):
        raise AssertionError(proc.communicate()[1].decode(errors="replace")[-3000:])
    return code
