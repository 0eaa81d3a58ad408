"""A file ingested again with other content supersedes its earlier version; the ingest graph takes a folder.

The earlier version leaves the index and the store (records, canvas, files), so a sentence removed from the file is
found nowhere under ``LONGDOC_HOME`` but, where they quote it, in the checkpoints and offloaded turns of the threads
that read it, which stay: their next run reading it is told the current version (410), and naming that version goes
on. A run that still holds it keeps it
until it ends. The command line, the ingest graph and the workflows ingest a folder through the same code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from doubles.checkpoint_checks import config, thread_rows
from doubles.replies import offload_chat_model
from graphs.ingest import graph
from nodes.collection.resolve import resolve_documents
from nodes.context import Context
from nodes.ingest_dir import superseded_documents
from stores.checkpoint import ThreadLock
from stores.documents import list_documents
from stores.errors import Gone
from stores.models import use_chat_model
from stores.offload import get_offload_store
from stores.readers import alone
from stores.vectorstore import get_client
from surfaces.access import OPEN
from surfaces.cli import main
from surfaces.listing import served_listing
from surfaces.retention import is_vector_index_file
from surfaces.superseded import retire_superseded

SECRET = "The 4471-HERON-VAULT code opens the archive."
SHELVES = "\n\n".join(f"Shelf {i} holds the old maps of the harbour and its lighthouses." for i in range(30))


def _copies(home: Path, needle: str) -> list[str]:
    """Files under the data home whose raw bytes hold ``needle`` (SQLite files and their logs included)."""
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and not is_vector_index_file(p, home) and needle.encode() in p.read_bytes()
    )


def _records(doc_id: str) -> int:
    """Records of ``doc_id`` in every collection of the store, but the chat turns offloaded under it."""
    return sum(
        sum((meta or {}).get("kind") != "offload" for meta in c.get(where={"doc_id": doc_id})["metadatas"])
        for c in get_client().list_collections()
    )


def _edit(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with a later modification time (a file system with coarse times sees the edit)."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "team"
    (root / "sub").mkdir(parents=True)
    (root / "archive.md").write_text(f"# Archive\n\n{SHELVES}\n\n## Vault\n\n{SECRET}\n", encoding="utf-8")
    (root / "sub" / "pumps.txt").write_text("Pumps\n\nThe pump team met on Monday by the well.\n", encoding="utf-8")
    return root


def _ingest(folder: Path, capsys: pytest.CaptureFixture[str], *more: str) -> dict[str, Any]:
    assert main(["ingest", str(folder), "-q", "--json", *more]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_an_edited_file_supersedes_its_earlier_version_everywhere(
    folder: Path, served: Any, longdoc_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _ingest(folder, capsys)
    old = {d["source"]: d["doc_id"] for d in first["documents"]}
    # a conversation that read the earlier version (about its shelves: what the thread keeps of the vault is nothing,
    # so no copy of the vault's words outlives the version)
    with use_chat_model(offload_chat_model()):
        asked = {"question": "Which shelf holds the old maps?", "doc_id": old["archive.md"]}
        served("chat").invoke(asked, config("t1"))
    assert _copies(longdoc_home, "4471-HERON") and thread_rows(longdoc_home, "t1") > 0

    _edit(folder / "archive.md", f"# Archive\n\n{SHELVES}\n\n## Vault\n\nThe vault is empty now.\n")
    again = _ingest(folder, capsys)
    new = {d["source"]: d["doc_id"] for d in again["documents"]}
    assert again["superseded"] == [old["archive.md"]] and new["archive.md"] != old["archive.md"]
    assert new["sub/pumps.txt"] == old["sub/pumps.txt"]
    # one document per file, the earlier version gone from the index and the store; its thread kept
    assert sorted(d.doc_id for d in list_documents("default")) == sorted(new.values())
    assert set(resolve_documents({"whole_namespace": True}, Context())) == set(new.values())
    assert _records(old["archive.md"]) == 0 and thread_rows(longdoc_home, "t1") > 0
    assert get_offload_store("default").list("t1")  # the thread kept whole, its offloaded turns too
    assert _copies(longdoc_home, "4471-HERON") == []
    assert _copies(longdoc_home, "vault is empty")  # the new version is there
    # a third ingest of the unchanged folder supersedes nothing
    assert _ingest(folder, capsys)["superseded"] == []
    # the thread's next turn is told what changed, and goes on with the current version
    with use_chat_model(offload_chat_model()):
        with pytest.raises(Gone, match=f"'archive.md'.*{new['archive.md']}"):
            served("chat").invoke({"question": "And now?"}, config("t1"))
        out = served("chat").invoke({"question": "And now?", "doc_id": new["archive.md"]}, config("t1"))
    assert out["doc_id"] == new["archive.md"] and out["answer"]


def test_a_file_named_alone_supersedes_its_earlier_version(folder: Path, longdoc_home: Path) -> None:
    path = folder / "archive.md"
    assert main(["ingest", str(path), "-q"]) == 0
    (before,) = list_documents("default")
    _edit(path, "# Archive\n\nNothing is kept in the vault.\n")
    out = graph.invoke({"path": str(path)})
    assert out["superseded"] == [before.doc_id] and superseded_documents("default") == [before.doc_id]
    # until it is removed, no namespace reading takes the earlier version
    assert resolve_documents({"whole_namespace": True}, Context()) == [out["doc_id"]]
    assert retire_superseded("default") == {"superseded": [before.doc_id], "kept": []}
    assert [d.doc_id for d in list_documents("default")] == [out["doc_id"]] and superseded_documents("default") == []
    assert _copies(longdoc_home, "4471-HERON") == []


def test_a_run_holding_the_earlier_version_keeps_it_until_it_ends(
    folder: Path, served: Any, longdoc_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = {d["source"]: d["doc_id"] for d in _ingest(folder, capsys)["documents"]}
    with use_chat_model(offload_chat_model()):
        served("chat").invoke({"question": "What opens the archive?", "doc_id": old["archive.md"]}, config("t1"))
    _edit(folder / "archive.md", "# Archive\n\nThe vault is empty now.\n")
    lock = ThreadLock("t1")  # a run going on in the conversation that read the earlier version
    assert lock.acquire()
    try:
        again = _ingest(folder, capsys)
        assert again["superseded"] == [] and again["kept"] == [old["archive.md"]]
        assert thread_rows(longdoc_home, "t1") > 0 and _records(old["archive.md"]) > 0  # nothing taken from it
        new = {d["source"]: d["doc_id"] for d in again["documents"]}
        assert set(resolve_documents({"whole_namespace": True}, Context())) == set(new.values())
        # nor is it listed, by the command line or a server
        assert main(["docs", "--json"]) == 0
        assert sorted(d["doc_id"] for d in json.loads(capsys.readouterr().out)["documents"]) == sorted(new.values())
        assert sorted(d["doc_id"] for d in served_listing(OPEN)["documents"]) == sorted(new.values())
        assert main(["docs"]) == 0 and old["archive.md"] not in capsys.readouterr().out
    finally:
        lock.release()
    assert retire_superseded("default") == {"superseded": [old["archive.md"]], "kept": []}
    assert thread_rows(longdoc_home, "t1") > 0 and _records(old["archive.md"]) == 0


def test_a_served_workflow_over_an_edited_folder_removes_the_earlier_version(
    folder: Path, longdoc_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(folder.parent))
    with TestClient(create_app(chat_model=offload_chat_model())) as client:
        first = client.post("/ingest/invoke", json={"input": {"path": "team"}})
        assert first.status_code == 200, first.text
        old = {d["source"]: d["doc_id"] for d in first.json()["output"]["documents"]}
        _edit(folder / "archive.md", "# Archive\n\nThe vault is empty now.\n")
        body = {"input": {"question": "What is in the vault?", "path": "team"}, "config": config("s1")}
        assert client.post("/chat/invoke", json=body).status_code == 200
    assert (
        old["archive.md"] not in {d.doc_id for d in list_documents("default")} and len(list_documents("default")) == 2
    )
    assert _copies(longdoc_home, "4471-HERON") == []


def test_the_ingest_graph_takes_a_folder_as_the_command_line_does(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.cache import reset_caches
    from stores.errors import TooLarge

    (folder / "broken.pdf").write_bytes(b"not a pdf at all")
    monkeypatch.setenv("LONGDOC_MAX_DOCUMENTS", "2")  # the folder is counted before any file is read
    reset_caches()
    with pytest.raises(TooLarge, match="LONGDOC_MAX_DOCUMENTS"):
        graph.invoke({"path": str(folder), "namespace": "g"})
    assert list_documents("g") == []
    monkeypatch.delenv("LONGDOC_MAX_DOCUMENTS")
    reset_caches()
    out = graph.invoke({"path": str(folder), "namespace": "g"})
    assert [d["source"] for d in out["documents"]] == ["archive.md", "sub/pumps.txt"]
    assert [d["title"] for d in out["documents"]] == ["Archive", "Pumps"]
    assert out["files"] == 3 and [f["path"] for f in out["failed"]] == ["broken.pdf"]
    assert out["chunks"] == sum(d["chunks"] for d in out["documents"]) > 2 and out["cached"] is False
    assert "doc_id" not in out and str(folder) not in json.dumps(out)
    assert sorted(d.doc_id for d in list_documents("g")) == sorted(d["doc_id"] for d in out["documents"])

    assert main(["ingest", str(folder), "-q", "--json", "--namespace", "c"]) == 2  # a file failed
    assert json.loads(capsys.readouterr().out) == out  # the same output, from the same code
    assert graph.invoke({"path": str(folder), "namespace": "g"}) == {
        **out,
        "cached": True,
        "documents": [{**d, "cached": True} for d in out["documents"]],
    }


class _DevThreads:
    """The threads of a ``langgraph dev`` server as its SDK client shows them: the latest values, the history."""

    def __init__(self, states: dict[str, list[dict[str, Any]]]) -> None:
        self.states, self.status, self.deleted = states, dict.fromkeys(states, "idle"), []

    async def search(self, limit: int = 10, offset: int = 0) -> list[dict[str, Any]]:
        ids = [t for t in self.states if t not in self.deleted][offset : offset + limit]
        return [{"thread_id": t, "values": self.states[t][-1], "status": self.status[t]} for t in ids]

    async def get_history(self, thread_id: str, limit: int = 10) -> list[dict[str, Any]]:
        return [{"values": values} for values in reversed(self.states[thread_id])][:limit]

    async def delete(self, thread_id: str) -> None:
        self.deleted.append(thread_id)


def test_langgraph_dev_removes_the_earlier_version_after_a_run_keeping_the_threads_that_read_it(
    folder: Path, longdoc_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from deploy import dev
    from surfaces.studio import StudioGuard

    path = folder / "archive.md"
    old = graph.invoke({"path": str(path)})["doc_id"]
    _edit(path, "# Archive\n\nNothing is kept in the vault.\n")
    new = graph.invoke({"path": str(path)})["doc_id"]
    # an earlier turn of t-old read the earlier version; t-new read only the new one
    server = _DevThreads(
        {"t-old": [{"doc_id": old}, {"doc_id": ""}], "t-new": [{"doc_id": new, "namespace": "default"}]}
    )
    monkeypatch.setattr(dev, "_threads", lambda: server)

    read: list[bool] = []  # whether the namespace was held while each run was answered

    def run() -> None:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            with alone("default") as free:
                read.append(not free)
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def receive() -> Any:
            body = {"assistant_id": "chat", "input": {"question": "Who?", "doc_id": new}}
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}

        async def send(message: Any) -> None:
            return None

        headers = [(b"host", b"localhost:2024"), (b"content-type", b"application/json")]
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/threads/t-new/runs/wait",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
        }
        asyncio.run(StudioGuard(app, after_run=dev.retire_on_dev)(scope, receive, send))

    server.status["t-old"] = "busy"  # a run going on in the thread that read it: kept until it ends
    run()
    assert server.deleted == [] and superseded_documents("default") == [old] and _copies(longdoc_home, "4471-HERON")
    server.status["t-old"] = "idle"
    run()
    assert server.deleted == [] and superseded_documents("default") == []
    assert [d.doc_id for d in list_documents("default")] == [new] and _copies(longdoc_home, "4471-HERON") == []
    assert read == [True, True]
