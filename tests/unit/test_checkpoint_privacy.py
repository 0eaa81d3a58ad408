"""Document text and uploads never reach the checkpoint database; refused requests leave no checkpoint.

Every table of the SQLite checkpointer (and its file) is scanned after a served upload, a chat
that names its document by ``text``, a question over the size limit and a question about an
unknown document.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from doubles.checkpoint_checks import config, db_holds, thread_rows
from doubles.replies import offload_chat_model
from nodes.ingest import ingest
from stores.checkpoint import open_checkpointer
from stores.documents import list_documents
from stores.errors import InputError
from stores.models import use_chat_model
from stores.questions import MAX_QUESTION_CHARS

SECRET = "Vault code 7731-ZEBRA-QUILL opens the archive."
TEXT = "\n\n".join(
    f"## Room {r}\n\n"
    + "\n\n".join(
        f"Shelf {i} of room {r}: the archive keeps old maps of the harbour and its lighthouses." for i in range(20)
    )
    for r in range(6)
)
TEXT += "\n\n## Vault\n\n" + SECRET
"""Several chunks: no chunk a workflow shows holds the whole text."""


def test_document_text_and_uploads_never_reach_the_checkpoint_database(served: Any, longdoc_home: Path) -> None:
    upload = base64.b64encode(("# Upload\n\nThe upload says: " + SECRET.replace("7731", "9902")).encode()).decode()
    out = served("ingest").invoke({"data": upload, "filename": "notes.md"}, config("t-upload"))
    assert out["chunks"] >= 1
    with use_chat_model(offload_chat_model()):
        chat = served("offload").invoke({"question": "What opens the archive?", "text": TEXT}, config("t-chat"))
    # the text was ingested as a document of its own, and the answer quotes the vault's chunk (only the ids are kept)
    assert [d.doc_id for d in list_documents("default") if d.title == "Room 0"] == [chat["doc_id"]]
    assert chat["answer"] == f"{SECRET} [{chat['sources'][0]['label']}]" and chat["citations"] == ["c6"]
    assert thread_rows(longdoc_home, "t-chat") > 0  # the chat is checkpointed, without the text
    with open_checkpointer() as saver:
        for item in saver.list(None):
            values = item.checkpoint["channel_values"]
            assert not values.get("text") and not (values.get("__start__") or {}).get("text")
            assert not [w for w in item.pending_writes or [] if w[1] in ("text", "data") and w[2]]
    for needle in ("9902-ZEBRA", "The upload says", upload[:40], TEXT[:1000], TEXT[-1000:]):
        assert db_holds(longdoc_home, needle) == [], needle


def test_refused_requests_leave_no_checkpoint(served: Any, longdoc_home: Path) -> None:
    doc_id = ingest(text=TEXT).doc_id
    huge = "why " * (MAX_QUESTION_CHARS // 2)
    with use_chat_model(offload_chat_model()), pytest.raises(InputError, match="characters long"):
        served("chain").invoke({"question": huge, "doc_id": doc_id}, config("t-huge"))
    with use_chat_model(offload_chat_model()), pytest.raises(InputError, match="not ingested"):
        served("chain").invoke({"question": "Which maps?", "doc_id": "0123456789abcdef"}, config("t-unknown"))
    assert thread_rows(longdoc_home, "t-huge") == thread_rows(longdoc_home, "t-unknown") == 0
    assert db_holds(longdoc_home, "why why why") == []


def test_a_refused_command_line_run_leaves_no_checkpoint(tmp_path: Path, longdoc_home: Path) -> None:
    from surfaces.cli import main

    doc = tmp_path / "archive.md"
    doc.write_text(TEXT, encoding="utf-8")
    huge = "why " * (MAX_QUESTION_CHARS // 2)
    assert main(["ask", str(doc), huge, "--thread-id", "t-cli"]) == 2
    assert main(["summarize", str(doc), "--query", huge, "--thread-id", "t-cli-sum"]) == 2
    assert not (longdoc_home / "checkpoints.sqlite").exists() or (
        thread_rows(longdoc_home, "t-cli") == thread_rows(longdoc_home, "t-cli-sum") == 0
    )
    assert db_holds(longdoc_home, "why why why") == []


def test_a_file_attached_to_a_chat_message_never_reaches_the_checkpoint_database(
    served: Any, longdoc_home: Path
) -> None:
    upload = base64.b64encode(TEXT.replace("7731", "4417").encode()).decode()
    block = {
        "type": "file",
        "source_type": "base64",
        "mime_type": "text/markdown",
        "data": upload,
        "metadata": {"filename": "vault.md"},
    }
    bad = {"type": "file", "base64": base64.b64encode(b"a,b\n4417,1\n").decode(), "mime_type": "text/csv"}
    words = {"type": "text", "text": "What opens the archive?"}
    with use_chat_model(offload_chat_model()):
        chat = served("chat").invoke({"messages": [{"type": "human", "content": [words, block]}]}, config("t-att"))
        refused = served("chat").invoke({"messages": [{"type": "human", "content": [words, bad]}]}, config("t-bad"))
    assert chat["turn"] == 1 and "[attached vault.md: document " in str(chat["messages"][0].content)
    assert "text/csv" in refused["messages"][-1].content and not refused.get("turn")
    for needle in (upload[:40], upload[len(upload) // 2 :][:40], upload[-40:], TEXT[:1000]):
        assert db_holds(longdoc_home, needle) == [], needle
