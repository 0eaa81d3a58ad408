"""``forget`` of a document leaves no copy of it, whether ask, summarize and chat read it alone or in a folder.

A secret sentence (and a title) written in one member of a folder of three documents reaches the checkpoints,
the chat's offloaded turns, the collection's canvas and its expert answer cache; forgetting that member from the
command line, or over HTTP with ``POST /forget``, leaves it in no file under ``LONGDOC_HOME``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doubles.checkpoint_checks import db_holds
from doubles.replies import workflow_chat_model
from stores.documents import list_documents
from stores.models import use_chat_model
from surfaces.cli import main
from tests.unit.test_retention import _live_copies

SECRET = "The vault code of the annex is 5521-KESTREL-MOSS."
TITLE = "Quillfeather Annex"
QUESTION = "What is the vault code of the annex?"
MEMBERS = {
    "a-harbour.md": "# Harbour Office\n\nThe harbour office keeps the tide tables. Its clerk opens at eight.\n",
    "b-annex.md": f"# {TITLE}\n\n{SECRET} The annex stores the old ledgers.\n",
    "c-depot.md": "# Depot\n\nThe depot repairs the cranes. The code of the depot gate is shared by its crew.\n",
}
FORGOTTEN = "b-annex.md"


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "team").mkdir(parents=True)
    for name, text in MEMBERS.items():
        (root / "team" / name).write_text(text, encoding="utf-8")
    return root


def _named(root: Path, shape: str) -> str:
    """What the runs name: the folder (a collection) or the member alone, relative to ``root``."""
    return "team" if shape == "collection" else f"team/{FORGOTTEN}"


def _forgotten_id() -> str:
    return next(d.doc_id for d in list_documents("default") if d.title == TITLE)


def _held(home: Path) -> list[str]:
    return sorted({*_live_copies(home, "5521-KESTREL"), *_live_copies(home, TITLE)})


def _offloaded() -> set[str]:
    """The documents the store's offloaded chat turns are kept under."""
    from stores.vectorstore import get_client

    found = [c.get(where={"kind": "offload"}, include=["metadatas"]) for c in get_client().list_collections()]
    return {str(m["doc_id"]) for f in found for m in f["metadatas"] or []}


def _planted(home: Path, shape: str) -> list[str]:
    """Where the secret is before forget: every workflow's thread, and a collection's own caches."""
    held = _held(home)
    assert any(p.startswith("checkpoints.sqlite") for p in held) and db_holds(home, "5521-KESTREL"), held
    if shape == "collection":
        assert any(p.startswith("namespaces/default/collections/") for p in held), held
    return held


def _run_cli(root: Path, shape: str, tmp_path: Path) -> None:
    named = str(root / _named(root, shape))
    script = tmp_path / "questions.txt"
    script.write_text(f"{QUESTION}\nWho keeps the old ledgers?\n", encoding="utf-8")
    with use_chat_model(workflow_chat_model()):
        assert main(["ask", named, QUESTION, "--thread-id", "cli-ask", "--json", "-q", "--no-stream"]) == 0
        summarize = ["summarize", named, "--query", QUESTION, "--length", "10", "--thread-id", "cli-sum", "--json"]
        assert main(summarize) == 0
        assert main(["chat", named, "--script", str(script), "--session", "cli-chat"]) == 0


def _run_served(client: Any, root: Path, shape: str, headers: dict[str, str]) -> None:
    named = _named(root, shape)
    for route, thread, body in (
        ("chain", "web-ask", {"question": QUESTION}),
        ("summarize", "web-sum", {"query": QUESTION, "length": 10}),
        ("offload", "web-chat", {"question": QUESTION}),
    ):
        sent = {"input": {**body, "path": named}, "config": {"configurable": {"thread_id": thread}}}
        if route == "offload":  # the conversation is about another member first, then takes the named ones
            first = {**sent, "input": {"question": "When does the clerk open?", "path": "team/a-harbour.md"}}
            assert client.post("/offload/invoke", json=first, headers=headers).status_code == 200
        answer = client.post(f"/{route}/invoke", json=sent, headers=headers)
        assert answer.status_code == 200, answer.text
    more = {"input": {"question": "Who keeps the old ledgers?"}, "config": {"configurable": {"thread_id": "web-chat"}}}
    assert client.post("/offload/invoke", json=more, headers=headers).status_code == 200


@pytest.mark.parametrize("shape", ["document", "collection"])
@pytest.mark.parametrize("surface", ["cli", "served"])
def test_forget_leaves_no_copy_of_a_document_read_alone_or_in_a_collection(
    surface: str,
    shape: str,
    tmp_path: Path,
    longdoc_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _folder(tmp_path)
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    threads = {"cli": ["cli-ask", "cli-sum", "cli-chat"], "served": ["web-ask", "web-sum", "web-chat"]}[surface]
    if surface == "cli":
        _run_cli(root, shape, tmp_path)
        capsys.readouterr()
        doc_id = _forgotten_id()
        _planted(longdoc_home, shape)
        assert main(["forget", "--doc", doc_id]) == 0
        report = json.loads(capsys.readouterr().out)
    else:
        from fastapi.testclient import TestClient

        from surfaces.serve import create_app

        monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps({"default": "d-key"}))
        headers = {"X-API-Key": "d-key"}
        with TestClient(create_app(chat_model=workflow_chat_model())) as client:
            _run_served(client, root, shape, headers)
            doc_id = _forgotten_id()
            _planted(longdoc_home, shape)
            harbour = next(d.doc_id for d in list_documents("default") if d.title == "Harbour Office")
            assert _offloaded() == {harbour, doc_id if shape == "document" else harbour}  # the turns' documents
            answer = client.post("/forget", json={"doc_id": doc_id, "namespace": "default"}, headers=headers)
            assert answer.status_code == 200, answer.text
            report = answer.json()
    assert sorted(report["threads"]) == sorted(threads) and report["documents"] == [doc_id], report
    assert report["checkpoints"] > 3 and report["records"] > 0, report
    if shape == "collection":  # the collection's cached expert answers went, and their file was compacted
        assert report["answers"] > 0 and "answers.sqlite" in report["compacted"], report
    assert _held(longdoc_home) == []
    assert db_holds(longdoc_home, doc_id) == []
    kept = sorted(d.title for d in list_documents("default"))
    assert kept == (
        ["Depot", "Harbour Office"] if shape == "collection" else ["Harbour Office"] * (surface == "served")
    )
    assert _offloaded() == set()


def test_a_thread_is_found_by_every_field_that_names_its_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from surfaces.retention import Names

    folder = tmp_path / "team"
    folder.mkdir()
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(tmp_path))
    names = Names.document("team", "d2", "team/b.md")  # a source relative to the ingest root
    assert names({"path": "team"}) and names({"__start__": {"path": "team/b.md"}}) and not names({"path": "other"})
    assert names({"doc_id": "d2", "namespace": "team"})
    assert names({"doc_id": "d1", "doc_ids": ["d1", "d2"]}) and names({"doc_id": "d1", "collection": ["d1", "d2"]})
    assert names({"documents": [{"tag": 1, "doc_id": "d1"}, {"tag": 2, "doc_id": "d2"}]})  # no doc_id at all
    assert names({"bound": {"doc_ids": ["d1", "d2"], "namespace": "team"}})
    assert names({"__start__": {"path": str(folder), "question": "Who?"}})  # a folder input not resolved yet
    assert names({"__start__": {"whole_namespace": True}})
    assert not names({"documents": [{"doc_id": "d1"}], "path": str(tmp_path / "elsewhere")})
    assert not names({"doc_ids": ["d2"], "namespace": "other"})  # the same id in another namespace is its own
    assert not Names.document("team", "d2", "text")({"path": str(tmp_path)})  # a text has no file in a folder
