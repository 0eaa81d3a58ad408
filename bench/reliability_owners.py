"""The owners suite of the reliability benchmark: documents and threads in a namespace two tenants share.

Over LangServe with two keys, ``b`` and ``c``, both given the namespace ``shared``, files read from an ingest
root, the scripted chat model:

- ``text upload kept``: ``c`` ingests a file, ``b`` uploads the same content as text (the same document id) and
  chats over it; the file is edited and ``c`` ingests it again. Held when ``b``'s document and thread are still
  there and ``b``'s next turn answers 200 (``documents_lost``, ``threads_lost``, ``next_turn``). Then the same
  inside one tenant: ``b``'s own text upload outlives the earlier version of ``b``'s own file.
- ``run across a supersede``: ``b`` summarizes a file's document without a thread and, while its first model call
  waits, ``c`` ingests the edited file. Held when ``b``'s run answers 200, ``b``'s thread that read the earlier
  version keeps its checkpoints and its next turn is a 410 naming the current version, and a turn naming that
  version answers 200 in the same thread.
- ``forget complete``: ``b`` uploads a secret as text, ``b`` and ``c`` chat over it on threads of their own, and
  ``b`` forgets the document. Held when no checkpoint row and no file under ``LONGDOC_HOME`` holds the secret
  (``checkpoint_rows_holding``, ``files_holding``) and ``c``'s next turn on its thread is a 410 saying why.

``python -m bench.reliability --suites owners --out FILE`` runs it alone; a case that does not hold makes
``bench.reliability`` exit 1 (:func:`owners_failures`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel
from doubles.checkpoint_checks import db_holds, thread_rows
from doubles.replies import workflow_reply
from doubles.tenants import invoke

B, C = {"X-API-Key": "b-key"}, {"X-API-Key": "c-key"}
KEYS = {"b": {"key": "b-key", "namespaces": ["shared"]}, "c": {"key": "c-key", "namespaces": ["shared"]}}
PLAN = "# Plan\n\nBob Chen manages procurement. Field trials start in June.\n"
EDITED = "# Plan\n\nAda Park manages procurement now. Field trials start in July.\n"
NOTES = "# Notes\n\n" + "\n\n".join(f"## Site {i}\n\nCrew {i} checks the panels in June." for i in range(40)) + "\n"
SECRET = "The 5512-OSPREY-LEDGER code opens the shared archive."
GATE_SECONDS = 60.0
"""Longest wait of the held model call for the supersede it lets happen (a bound, not a pace)."""


class Gate:
    """A model reply that, once armed, holds its first call until released (the run is then mid-way)."""

    def __init__(self) -> None:
        self.armed = False
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: Sequence[BaseMessage]) -> str:
        """The workflows' scripted reply, after the release when this is the armed call."""
        if self.armed and not self.started.is_set():
            self.started.set()
            self.release.wait(GATE_SECONDS)
        return workflow_reply(messages)


@contextlib.contextmanager
def _served(root: Path, gate: Gate) -> Iterator[Any]:
    """A LangServe client with the two keys, ``root`` as the ingest root and the gated scripted model."""
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    settings = {"LONGDOC_SERVER_KEYS": json.dumps(KEYS), "LONGDOC_INGEST_ROOT": str(root)}
    with mock.patch.dict(os.environ, settings), TestClient(create_app(ScriptedChatModel(default=gate))) as client:
        yield client


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` a second later than its last time (a changed file whatever the clock's grain)."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if old:
        os.utime(path, ns=(old + 10**9, old + 10**9))


def _doc(reply: Any) -> str:
    return str(reply.json()["output"]["doc_id"]) if reply.status_code == 200 else ""


def _known(doc_id: str) -> bool:
    from stores.documents import find_document

    return bool(doc_id) and find_document("shared", doc_id) is not None


def _rows(thread: str, tenant: str) -> int:
    from stores.settings import get_settings
    from surfaces.access import thread_key

    return thread_rows(get_settings().home, thread_key(tenant, thread))


def text_upload_kept(client: Any, root: Path) -> list[dict[str, Any]]:
    """A text upload with the content of a file's earlier version, another tenant's and one's own."""
    _write(root / "plan.md", PLAN)
    filed = _doc(invoke(client, "ingest", C, {"path": "plan.md"}))
    uploaded = _doc(invoke(client, "ingest", B, {"text": PLAN}))
    first = invoke(client, "offload", B, {"question": "Who manages procurement?", "doc_id": uploaded}, "bchat")
    _write(root / "plan.md", EDITED)
    again = invoke(client, "ingest", C, {"path": "plan.md"})
    after = invoke(client, "offload", B, {"question": "When do the trials start?"}, "bchat")
    rows = [
        {
            "case": "another tenant's text upload outlives the earlier version of a file with its content",
            "held": filed == uploaded != ""
            and first.status_code == again.status_code == 200
            and _known(uploaded)
            and _rows("bchat", "b") > 0
            and after.status_code == 200,
            "documents_lost": int(not _known(uploaded)),
            "threads_lost": int(_rows("bchat", "b") == 0),
            "next_turn": after.status_code,
        }
    ]
    _write(root / "own.md", "The own archive holds the harbour maps.\n")
    own = _doc(invoke(client, "ingest", B, {"path": "own.md"}))
    same = _doc(invoke(client, "ingest", B, {"text": (root / "own.md").read_text(encoding="utf-8")}))
    _write(root / "own.md", "The own archive is empty now.\n")
    invoke(client, "ingest", B, {"path": "own.md"})
    rows.append(
        {
            "case": "one's own text upload outlives the earlier version of one's own file",
            "held": own == same != "" and _known(same),
            "documents_lost": int(not _known(same)),
        }
    )
    return rows


def run_across_supersede(client: Any, root: Path, gate: Gate) -> dict[str, Any]:
    """A stateless run while another tenant's ingest supersedes its document, and a thread that read it."""
    _write(root / "notes.md", NOTES)
    old = _doc(invoke(client, "ingest", C, {"path": "notes.md"}))
    read = invoke(client, "offload", B, {"question": "Who manages procurement?", "doc_id": old}, "bread")
    replies: list[Any] = []
    gate.armed = True
    asking = threading.Thread(
        target=lambda: replies.append(invoke(client, "summarize", B, {"doc_id": old, "length": 40}))
    )
    asking.start()
    gate.started.wait(GATE_SECONDS)
    _write(root / "notes.md", NOTES.replace("June", "July"))
    again = invoke(client, "ingest", C, {"path": "notes.md"})
    gate.release.set()
    asking.join()
    gate.armed = False
    new = _doc(again)
    kept = _rows("bread", "b")
    nxt = invoke(client, "offload", B, {"question": "And in July?"}, "bread")
    named = invoke(client, "offload", B, {"question": "Who manages it now?", "doc_id": new}, "bread")
    stateless = replies[0].status_code if replies else 0
    return {
        "case": "a run across another tenant's supersede, and a thread that read the earlier version",
        "held": read.status_code == again.status_code == 200
        and stateless == 200
        and not _known(old)
        and kept > 0
        and nxt.status_code == 410
        and new in nxt.text
        and named.status_code == 200,
        "stateless_run": stateless,
        "stateless_message": "" if stateless == 200 or not replies else replies[0].text[:200],
        "threads_lost": int(kept == 0),
        "next_turn": nxt.status_code,
        "next_turn_naming_the_new_version": named.status_code,
    }


def forget_complete(client: Any) -> dict[str, Any]:
    """One tenant forgets a document both tenants' threads read."""
    from stores.settings import get_settings
    from surfaces.retention import is_vector_index_file

    doc = _doc(invoke(client, "ingest", B, {"text": f"# Ledger\n\n{SECRET}\n"}))
    asked = [
        invoke(client, "offload", B, {"question": "What opens the shared archive?", "doc_id": doc}, "bz"),
        invoke(client, "offload", C, {"question": "Which code opens the archive?", "doc_id": doc}, "cz"),
    ]
    home = get_settings().home
    before = len(db_holds(home, "5512-OSPREY"))
    gone = client.post("/forget", json={"doc_id": doc, "namespace": "shared"}, headers=B)
    rows = len(db_holds(home, "5512-OSPREY"))
    files = [
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and not is_vector_index_file(p, home) and b"5512-OSPREY" in p.read_bytes()
    ]
    nxt = invoke(client, "offload", C, {"question": "And the archive?"}, "cz")
    return {
        "case": "a forget in a shared namespace leaves no tenant's copy and tells the other tenant's thread",
        "held": all(r.status_code == 200 for r in asked)
        and gone.status_code == 200
        and before > 0
        and rows == 0
        and not files
        and nxt.status_code == 410
        and "forgotten" in nxt.text,
        "checkpoint_rows_holding_before": before,
        "checkpoint_rows_holding": rows,
        "files_holding": files,
        "other_tenant_next_turn": nxt.status_code,
    }


def owners(tmp: Path) -> dict[str, Any]:
    """The suite: each case's row, and how many held."""
    root = tmp / "owners-root"
    root.mkdir(parents=True, exist_ok=True)
    gate = Gate()
    with _served(root, gate) as client:
        rows = text_upload_kept(client, root)
        rows.append(run_across_supersede(client, root, gate))
        rows.append(forget_complete(client))
    return {"cases": len(rows), "held": sum(bool(r["held"]) for r in rows), "rows": rows}


def owners_failures(part: dict[str, Any]) -> list[str]:
    """What in the owners suite falls short (nothing when it did not run)."""
    if not part or part.get("held", 0) >= part.get("cases", 0) > 0:
        return []
    short = [r["case"] for r in part.get("rows", []) if not r["held"]] or ["no case ran"]
    return [f"owners: did not hold: {'; '.join(short)}"]
