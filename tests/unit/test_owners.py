"""Documents are owned by what put them there; a supersede and a forget treat every tenant's data alike.

Document ids are content hashes, so a text upload and a file with the same content are one document: the earlier
version of a file is removed only when nothing else owns it, the threads that read it are kept and told the current
version (410), and no run finds its document gone half-way. A forget in a namespace tenants share removes every
tenant's threads that read the document, and another tenant's thread says why (410).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel
from doubles.checkpoint_checks import db_holds, thread_rows
from doubles.replies import workflow_reply
from doubles.tenants import invoke
from graphs.ingest import graph
from stores.documents import find_document
from stores.offload import get_offload_store
from stores.readers import alone, reading
from surfaces.access import thread_key
from surfaces.serve import create_app
from surfaces.superseded import retire_superseded

B, C = {"X-API-Key": "b-key"}, {"X-API-Key": "c-key"}
PLAN = "# Plan\n\nBob Chen manages procurement. Field trials start in June.\n"
NOTES = "# Notes\n\n" + "\n\n".join(f"## Site {i}\n\nCrew {i} checks the panels in June." for i in range(40)) + "\n"


def _edit(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with a later modification time (a file system with coarse times sees the edit)."""
    st = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


class Held:
    """A scripted reply that holds the first call after :attr:`armed` is set until :attr:`release` is."""

    def __init__(self) -> None:
        self.armed, self.started, self.release = False, threading.Event(), threading.Event()

    def __call__(self, messages: Sequence[BaseMessage]) -> str:
        if self.armed and not self.started.is_set():
            self.started.set()
            assert self.release.wait(60)
        return workflow_reply(messages)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
def client(root: Path, held: Held, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """LangServe with tenants ``b`` and ``c`` sharing namespace ``shared``, files read from ``root``."""
    shared = {"namespaces": ["shared"]}
    monkeypatch.setenv(
        "LONGDOC_SERVER_KEYS", json.dumps({"b": {"key": "b-key", **shared}, "c": {"key": "c-key", **shared}})
    )
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    with TestClient(create_app(chat_model=ScriptedChatModel(default=held))) as served:
        yield served


def _ingested(reply: Any) -> str:
    assert reply.status_code == 200, reply.text
    return str(reply.json()["output"]["doc_id"])


def test_an_upload_or_another_file_with_the_content_of_an_earlier_version_is_kept(root: Path) -> None:
    (root / "plan.md").write_text(PLAN, encoding="utf-8")
    old = graph.invoke({"path": str(root / "plan.md")})["doc_id"]
    assert graph.invoke({"text": PLAN})["doc_id"] == old  # one content, one document: owned by the upload too
    (root / "a.md").write_text("# Copy\n\nThe old schedule.\n", encoding="utf-8")
    (root / "b.md").write_text("# Copy\n\nThe old schedule.\n", encoding="utf-8")
    (root / "c.md").write_text("# Other\n\nThe old budget.\n", encoding="utf-8")
    copy, other = (graph.invoke({"path": str(root / name)})["doc_id"] for name in ("a.md", "c.md"))
    assert graph.invoke({"path": str(root / "b.md")})["doc_id"] == copy
    for name in ("plan.md", "a.md", "c.md"):
        _edit(root / name, f"# {name}\n\nEverything changed.\n")
        graph.invoke({"path": str(root / name)})
    # only the earlier version that nothing else owns goes
    assert retire_superseded("default") == {"superseded": [other], "kept": []}
    assert find_document("default", old) is not None and find_document("default", copy) is not None
    assert find_document("default", other) is None


def test_another_tenants_upload_and_thread_outlive_a_supersede(
    client: TestClient, root: Path, longdoc_home: Path
) -> None:
    (root / "plan.md").write_text(PLAN, encoding="utf-8")
    filed = _ingested(invoke(client, "ingest", C, {"path": "plan.md"}))
    uploaded = _ingested(invoke(client, "ingest", B, {"text": PLAN}))
    assert uploaded == filed
    asked = invoke(client, "offload", B, {"question": "Who manages procurement?", "doc_id": uploaded}, "bchat")
    assert asked.status_code == 200, asked.text
    _edit(root / "plan.md", "# Plan\n\nAda Park manages procurement now.\n")
    again = invoke(client, "ingest", C, {"path": "plan.md"})
    assert again.status_code == 200 and again.json()["output"]["superseded"] == [filed]
    assert find_document("shared", uploaded) is not None
    assert thread_rows(longdoc_home, thread_key("b", "bchat")) > 0
    after = invoke(client, "offload", B, {"question": "When do the trials start?"}, "bchat")
    assert after.status_code == 200, after.text
    assert after.json()["output"]["turn"] == 2


def test_a_run_goes_on_across_another_tenants_supersede_and_a_thread_learns_the_current_version(
    client: TestClient, root: Path, held: Held, longdoc_home: Path
) -> None:
    (root / "notes.md").write_text(NOTES, encoding="utf-8")
    old = _ingested(invoke(client, "ingest", C, {"path": "notes.md"}))
    read = invoke(client, "offload", B, {"question": "Who checks the panels?", "doc_id": old}, "bread")
    assert read.status_code == 200, read.text
    replies: list[Any] = []
    held.armed = True
    summary = threading.Thread(
        target=lambda: replies.append(invoke(client, "summarize", B, {"doc_id": old, "length": 40}))
    )
    summary.start()
    try:
        assert held.started.wait(60)  # the run is past its first reads, its model call held
        _edit(root / "notes.md", NOTES.replace("June", "July"))
        new = _ingested(invoke(client, "ingest", C, {"path": "notes.md"}))
        assert find_document("shared", old) is not None  # a run reads the namespace: the earlier version stays
    finally:
        held.release.set()
        summary.join()
    assert replies[0].status_code == 200, replies[0].text
    # removed once no run reads it; the thread that read it stays and is told what changed
    assert find_document("shared", old) is None
    assert thread_rows(longdoc_home, thread_key("b", "bread")) > 0
    told = invoke(client, "offload", B, {"question": "And in July?"}, "bread")
    assert told.status_code == 410 and "'notes.md'" in told.text and new in told.text
    named = invoke(client, "offload", B, {"question": "Who checks them now?", "doc_id": new}, "bread")
    assert named.status_code == 200, named.text
    assert named.json()["output"]["doc_id"] == new


def test_a_forget_in_a_shared_namespace_removes_every_tenants_copies(client: TestClient, longdoc_home: Path) -> None:
    secret = "The 7730-KESTREL-DOOR code opens the shared store."
    doc = _ingested(invoke(client, "ingest", B, {"text": f"# Ledger\n\n{secret}\n"}))
    for headers, thread in ((B, "bz"), (C, "cz")):
        asked = invoke(client, "offload", headers, {"question": "Which code opens the store?", "doc_id": doc}, thread)
        assert asked.status_code == 200, asked.text
    sessions = [thread_key("b", "bz"), thread_key("c", "cz")]
    store = get_offload_store("shared")
    assert db_holds(longdoc_home, "7730-KESTREL") and all(store.list(s) for s in sessions)

    gone = client.post("/forget", json={"doc_id": doc, "namespace": "shared"}, headers=B)
    assert gone.status_code == 200, gone.text
    assert db_holds(longdoc_home, "7730-KESTREL") == [] and not any(store.list(s) for s in sessions)
    assert thread_rows(longdoc_home, sessions[1]) == 0
    assert gone.json()["threads"] == ["bz"] and gone.json()["others"] == 1  # the other tenant's thread is not named

    told = invoke(client, "offload", C, {"question": "And the store?"}, "cz")
    assert told.status_code == 410 and "forgotten" in told.text and doc in told.text
    # the owner of the thread clears it, and its id is free again
    assert client.post("/forget", json={"thread_id": "cz"}, headers=C).status_code == 200
    fresh = _ingested(invoke(client, "ingest", C, {"text": PLAN}))
    again = invoke(client, "offload", C, {"question": "Who manages procurement?", "doc_id": fresh}, "cz")
    assert again.status_code == 200 and again.json()["output"]["turn"] == 1


def test_the_earlier_versions_wait_for_every_run_reading_the_namespace() -> None:
    entered, done = threading.Event(), threading.Event()

    def run() -> None:
        with reading("shared"):
            entered.set()
            done.wait(60)

    other = threading.Thread(target=run)
    other.start()
    assert entered.wait(60)
    with alone("shared") as free, reading("other"):
        assert free is False  # another namespace's runs do not count
    done.set()
    other.join()
    with alone("shared") as free:
        assert free is True


def test_the_command_line_keeps_an_earlier_version_while_a_run_reads_the_namespace(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from surfaces.cli import main

    (root / "plan.md").write_text(PLAN, encoding="utf-8")
    assert main(["ingest", str(root / "plan.md"), "-q", "--json"]) == 0
    old = json.loads(capsys.readouterr().out)["doc_id"]
    _edit(root / "plan.md", "# Plan\n\nAda Park manages procurement now.\n")
    with reading("default"):  # a run of another process or thread reading the namespace
        assert main(["ingest", str(root / "plan.md"), "-q", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["superseded"] == [] and out["kept"] == [old] and find_document("default", old) is not None
    assert retire_superseded("default") == {"superseded": [old], "kept": []}
