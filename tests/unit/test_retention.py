"""``forget`` deletes a thread, a document or a namespace with their checkpoints, vectors, files and records.

Everything else stays: another namespace's copy of the same document, other threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doubles.checkpoint_checks import config, db_holds, thread_rows, threads_holding
from doubles.replies import offload_chat_model
from nodes.ingest import ingest
from stores.documents import cache_path, doc_dir, list_documents, namespace_dir
from stores.errors import InputError
from stores.models import use_chat_model
from stores.vectorstore import get_client, get_store
from surfaces.access import thread_key
from surfaces.cli import main
from surfaces.retention import forget_document, forget_thread, is_vector_index_file
from tests.unit.test_checkpoint_privacy import TEXT


def _everything(namespace: str, doc_id: str) -> dict[str, int]:
    """What is stored of ``doc_id``: records in any collection of the namespace, shared files, local files."""
    records = sum(
        len(c.get(where={"doc_id": doc_id}, include=[])["ids"])
        for c in get_client().list_collections()
        if (c.metadata or {}).get("namespace") == namespace
    )
    folder = doc_dir(namespace, doc_id)
    return {"records": records, "files": sum(1 for _ in folder.rglob("*")) if folder.exists() else 0}


def test_forget_removes_a_thread_a_document_and_a_namespace(served: Any, longdoc_home: Path) -> None:
    kept = ingest(text="# Other\n\nA document that stays, about lighthouses.", namespace="team").doc_id
    with use_chat_model(offload_chat_model()):
        out = served("offload").invoke({"question": "What opens the archive?", "text": TEXT}, config("t-doc"))
        served("offload").invoke(
            {"question": "Who keeps the maps?", "text": TEXT, "namespace": "team"}, config("t-team")
        )
        served("offload").invoke({"question": "Anything else?", "doc_id": kept, "namespace": "team"}, config("t-kept"))
    doc_id = out["doc_id"]
    cache_path("default", doc_id, "extra.json").write_text("{}", encoding="utf-8")
    assert _everything("default", doc_id)["records"] > 0 and thread_rows(longdoc_home, "t-doc") > 0

    forget_thread("t-kept")
    assert thread_rows(longdoc_home, "t-kept") == 0 and thread_rows(longdoc_home, "t-team") > 0

    report = forget_document("default", doc_id)
    assert _everything("default", doc_id) == {"records": 0, "files": 0}
    assert thread_rows(longdoc_home, "t-doc") == 0 and "t-doc" in report["threads"]
    assert _everything("team", doc_id)["records"] > 0  # the same text in another namespace is its own
    # the team's copy has the same id (the text's hash): only its thread still names it
    assert threads_holding(longdoc_home, doc_id) == {"t-team"}

    assert main(["forget", "--namespace", "team"]) == 0
    assert list_documents("team") == [] and not namespace_dir("team").exists()
    assert thread_rows(longdoc_home, "t-team") == 0
    assert not [c for c in get_client().list_collections() if (c.metadata or {}).get("namespace") == "team"]
    assert get_store("default").count() == 0 and db_holds(longdoc_home, "7731-ZEBRA") == []
    assert db_holds(longdoc_home, doc_id) == []
    with pytest.raises(InputError):
        forget_document("default", "../etc")
    assert main(["forget"]) != 0  # nothing named: refused


def _live_copies(home: Path, needle: str) -> list[str]:
    """Files under the data home whose bytes hold ``needle``, read as a running server leaves them: databases and
    their write-ahead logs (Chroma's SQLite file included), documents, caches, nothing checkpointed or vacuumed first.

    Chroma's vector index files (``chroma/<segment>/*.bin``) are left out: Chroma writes them from buffers whose
    unused part is whatever its process's memory held (stray bytes of any text it handled, not records)."""
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and not is_vector_index_file(p, home) and needle.encode() in p.read_bytes()
    )


def test_forget_over_http_deletes_the_callers_own_data_and_leaves_no_copy(
    monkeypatch: pytest.MonkeyPatch, longdoc_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps({"b": "b-key", "c": {"key": "c-key", "namespaces": ["b"]}}))
    b, c = {"X-API-Key": "b-key"}, {"X-API-Key": "c-key"}
    question = "Where is the 9911-OSPREY-LEDGER kept?"
    with TestClient(create_app(chat_model=offload_chat_model())) as client:
        doc = client.post("/ingest/invoke", json={"input": {"text": TEXT}}, headers=b).json()["output"]["doc_id"]

        def turn(thread: str, text: str, on: Any = client) -> Any:
            body = {"input": {"question": text, "doc_id": doc}, "config": {"configurable": {"thread_id": thread}}}
            return on.post("/offload/invoke", json=body, headers=b)

        assert turn("bchat", question).status_code == 200 and turn("bchat", "And the maps?").status_code == 200
        assert turn("bchat2", "Who keeps the maps?").status_code == 200
        assert _live_copies(longdoc_home, "9911-OSPREY") and _live_copies(longdoc_home, "7731-ZEBRA")

        # Another tenant names B's thread: the answer an unknown thread gets, and B's thread stays.
        assert client.post("/forget", json={"thread_id": "bchat"}, headers=c).status_code == 404
        gone = client.post("/forget", json={"thread_id": "bchat"}, headers=b)
        assert gone.status_code == 200, gone.text
        report = gone.json()
        assert report["threads"] == ["bchat"] and report["checkpoints"] > 2 and report["records"] >= 2, report
        assert "checkpoints.sqlite" in report["compacted"] and "chroma.sqlite3" in report["compacted"]
        assert _live_copies(longdoc_home, "9911-OSPREY") == []
        again = client.post("/forget", json={"thread_id": "bchat"}, headers=b)
        assert again.status_code == 404 and "no thread" in again.json()["detail"]
        assert turn("bchat2", "Anything else?").json()["output"]["turn"] == 2  # the other thread is whole

        dropped = client.post("/forget", json={"doc_id": doc, "namespace": "b"}, headers=b)
        assert dropped.status_code == 200, dropped.text
        assert dropped.json()["documents"] == [doc] and dropped.json()["threads"] == ["bchat2"]
        assert _live_copies(longdoc_home, "7731-ZEBRA") == [] and _live_copies(longdoc_home, "old maps") == []
        assert client.post("/forget", json={"doc_id": doc, "namespace": "b"}, headers=b).status_code == 404
        assert client.post("/forget", json={"doc_id": doc, "namespace": "c"}, headers=c).status_code == 403

    # The operator's command: what does not exist is an error, a served thread is found by the id its caller knows.
    assert main(["forget", "--thread", "nonexistent"]) == 2 and "no thread" in capsys.readouterr().err
    with TestClient(create_app(chat_model=offload_chat_model())) as other:
        other.post("/ingest/invoke", json={"input": {"text": TEXT}}, headers=b)
        assert turn("bchat3", "Who keeps the maps?", other).status_code == 200
    assert main(["forget", "--thread", "bchat3", "--tenant", "c"]) == 2
    assert main(["forget", "--thread", "bchat3"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"] == [thread_key("b", "bchat3")]
    assert main(["forget", "--doc", doc, "--namespace", "b"]) == 0  # ingested again above
    assert main(["forget", "--doc", doc, "--namespace", "b"]) == 2 and "no document" in capsys.readouterr().err
    assert main(["forget", "--namespace", "never-used"]) == 2
