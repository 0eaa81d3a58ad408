"""A document's index is published whole or not at all, on the local store and on a Chroma server.

Six concurrent ingests of one document with chunk sizes 900, 300 and 600 (threads, then processes)
end with one index whose record, visible chunks and stored records agree; a re-index killed with
SIGKILL half-way, later, just before its record is written or just after leaves a whole index in
use (the previous one until the record switches), and the next ingest leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doubles.index_checks import (
    KILL_POINTS,
    SIZES,
    assert_whole,
    ingest_in_processes,
    ingest_in_threads,
    kill_reindex,
    long_text,
    stored_chunks,
)
from nodes.ingest import ingest
from stores.text import content_hash
from stores.vectorstore import reset_stores
from tests.backends import backend, chroma_url

__all__ = ["backend", "chroma_url"]  # fixtures


@pytest.fixture
def document(tmp_path: Path) -> tuple[Path, str]:
    text = long_text()
    path = tmp_path / "big.md"
    path.write_text(text, encoding="utf-8")
    return path, text


def test_six_concurrent_rechunks_in_threads_leave_one_whole_index(document: tuple[Path, str]) -> None:
    _, text = document
    results = ingest_in_threads("conc", text)
    assert not [r for r in results if isinstance(r, Exception)]
    doc_id = results[0].doc_id
    info = assert_whole("conc", doc_id, text)
    assert info.chunk_size in SIZES


def test_six_concurrent_rechunks_in_processes_leave_one_whole_index(document: tuple[Path, str]) -> None:
    path, text = document
    outcomes = ingest_in_processes(path, "procs")
    assert [code for code, _ in outcomes] == [0] * len(SIZES), [err.decode()[-2000:] for _, err in outcomes]
    reset_stores()
    assert_whole("procs", content_hash(text), text)


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_reindex_killed_at_any_point_leaves_a_whole_index_and_the_next_ingest_cleans_up(
    document: tuple[Path, str], point: str
) -> None:
    path, text = document
    doc_id = ingest(text=text, namespace="killed", chunk_size=900).doc_id
    assert kill_reindex(path, "killed", 300, point) == -9
    reset_stores()
    info = assert_whole("killed", doc_id, text, leftovers=True)
    assert info.chunk_size == (300 if point == "cleanup" else 900)  # the record switches in one step
    again = ingest(text=text, namespace="killed", chunk_size=300)
    assert again.doc_id == doc_id and again.cached == (point == "cleanup")
    assert assert_whole("killed", doc_id, text).chunk_size == 300
    assert stored_chunks("killed", doc_id) == again.chunks


@pytest.mark.enable_socket
@pytest.mark.integration
def test_with_postgres_the_index_lock_is_an_advisory_lock_shared_by_every_instance(
    backend: str, document: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile
    import threading
    import time

    import psycopg

    from deploy.cluster import postgres, postgres_bindir
    from stores.documents import document_lock

    if backend != "local" or postgres_bindir() is None:
        pytest.skip("once, with the PostgreSQL server binaries (.ci/system-deps)")
    _, text = document
    folder = Path(tempfile.mkdtemp(prefix="longdoc-pg-"))
    folder.chmod(0o755)  # the postgres user must reach its cluster inside
    with postgres(folder / "db") as url:
        monkeypatch.setenv("LONGDOC_POSTGRES_URL", url)
        entered: list[str] = []
        with document_lock("pg", "doc1"):
            with psycopg.connect(url) as conn:  # another instance sees the lock in the shared database
                held = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()

            def wait() -> None:
                with document_lock("pg", "doc1"):
                    entered.append("b")

            waiter = threading.Thread(target=wait)
            waiter.start()
            with psycopg.connect(url) as conn:  # the waiter's request for the lock shows, not granted
                waiting, deadline = 0, time.monotonic() + 30
                while not waiting and time.monotonic() < deadline:
                    row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                    waiting = int((row.fetchone() or (0,))[0])
            entered.append("a")  # still holding: the waiter has not entered
        waiter.join(timeout=30)
        assert held is not None and held[0] >= 1 and waiting == 1 and entered == ["a", "b"]
        results = ingest_in_threads("pg", text)
        assert not [r for r in results if isinstance(r, Exception)]
        assert_whole("pg", results[0].doc_id, text)
    shutil.rmtree(folder, ignore_errors=True)
