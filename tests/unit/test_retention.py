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
from stores.models import use_chat_model
from stores.settings import InputError
from stores.vectorstore import get_client, get_store
from surfaces.cli import main
from surfaces.retention import forget_document, forget_thread
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
