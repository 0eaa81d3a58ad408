"""The scale-out deployment's door in process: chat turns with documents attached, refusals, MCP and A2A calls.

The door is the real :class:`deploy.app.TenantGuard` (and, for MCP and A2A, the real ``deploy.app`` routes);
behind it, in Aegra's place, a small ASGI app (:class:`Runs`) runs the served graphs (scripted model, hash
embeddings, an in-memory checkpointer) on the run endpoints those callers use, with the body the guard passed
on, and keeps that body as Aegra keeps a run's record. ``tests/integration/test_scaleout.py`` runs the same
calls on two real Aegra instances with PostgreSQL.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from starlette.testclient import TestClient

from deploy import app as door
from deploy import assistants
from deploy.auth import keyring
from doubles.chat import ScriptedChatModel
from doubles.files import docx_bytes, pdf_with_text
from doubles.replies import _detail_lines, offload_chat_model, offload_reply
from nodes.ingest import ingest
from stores.documents import find_document, list_documents
from stores.models import use_chat_model
from surfaces import registry

KEYS = {"team-a": "key-a", "team-b": {"key": "key-b", "namespaces": ["team-b", "team-b-old"]}}
LINE = "Bob Chen manages procurement for Project Falcon. Field trials start in June."
RUN = re.compile(r"^/threads/(?P<thread>[^/]+)/runs(?P<wait>/wait)?$")
RUN_STATUS = re.compile(r"^/threads/(?P<thread>[^/]+)/runs/(?P<run>[^/]+)(?P<join>/join)?$")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _message(message: BaseMessage) -> dict[str, Any]:
    return {
        "type": message.type,
        "id": message.id,
        "content": message.content,
        "additional_kwargs": message.additional_kwargs,
    }


class Runs:
    """Aegra's place behind the guard: ``POST /threads``, runs made and waited for, joined and looked up.

    A run's graph runs to its end when the run is made; a failed run has status ``error`` and its exception's text
    as ``error_message``, as Aegra records it. Each run request the guard passed on is kept (:attr:`records`).
    """

    def __init__(self) -> None:
        self.saver = InMemorySaver()
        self.records: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.model: Any = offload_chat_model
        """What plays the model: a factory of scripted chat models."""

    async def run(self, thread: str, request: dict[str, Any]) -> dict[str, Any]:
        self.records.append(request)
        workflow = str(assistants.workflow_of(str(request["assistant_id"])))
        graph = registry.compile_with(workflow, self.saver)
        config = {"configurable": {"thread_id": thread}}
        run: dict[str, Any] = {"run_id": str(uuid.uuid4()), "thread_id": thread, "status": "success", "values": {}}
        try:
            with use_chat_model(self.model()):
                values = await graph.ainvoke(request.get("input"), config, context=request["context"])
        except Exception as exc:  # noqa: BLE001 - a failed run, recorded as Aegra records it
            run.update(status="error", error_message=str(exc))
        else:
            messages = [_message(m) for m in values.get("messages", [])]
            run["values"] = {**{k: v for k, v in values.items() if k != "messages"}, "messages": messages}
        self.runs[run["run_id"]] = run
        return run

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        made, looked_up = RUN.match(path), RUN_STATUS.match(path)
        if method == "POST" and path == "/threads":
            out: Any = {"thread_id": str(uuid.uuid4())}
        elif method == "POST" and made is not None:
            run = await self.run(made["thread"], json.loads(body))
            out = run["values"] if made["wait"] else {k: v for k, v in run.items() if k != "values"}
        elif method == "GET" and looked_up is not None:
            run = self.runs[looked_up["run"]]
            out = run["values"] if looked_up["join"] else {k: v for k, v in run.items() if k != "values"}
        else:
            raise AssertionError(f"not served here: {method} {path}")
        payload = json.dumps(out, default=str).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def aegra(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Runs]]:
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    keyring.cache_clear()
    door._owners.cache_clear()
    runs = Runs()
    yield TestClient(door.TenantGuard(runs)), runs  # no lifespan: the guard has none
    keyring.cache_clear()
    door._owners.cache_clear()


def turn(http: TestClient, thread: str, content: Any, key: str = "key-b", **body: Any) -> tuple[int, dict[str, Any]]:
    """One chat turn as a chat client sends it: the human message, on ``runs/wait``."""
    request = {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": content}]}, **body}
    answer = http.post(f"/threads/{thread}/runs/wait", json=request, headers={"X-API-Key": key})
    return answer.status_code, answer.json()


WORDS = {"type": "text", "text": "Who manages procurement?"}
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.mark.parametrize(
    "block",
    [
        {
            "type": "file",
            "base64": _b64(pdf_with_text(LINE)),
            "mime_type": "application/pdf",
            "extras": {"filename": "f.pdf"},
        },
        {
            "type": "file",
            "source_type": "base64",
            "data": _b64(docx_bytes([LINE])),
            "mime_type": DOCX,
            "metadata": {"filename": "falcon.docx"},
        },
        {"type": "file", "base64": _b64(f"# Falcon\n\n{LINE}\n".encode()), "mime_type": "text/markdown"},
        {"type": "file", "base64": _b64(f"<p>{LINE}</p>".encode()), "mime_type": "text/html"},
        {"type": "file", "base64": _b64(LINE.encode()), "mimeType": "text/plain", "metadata": {"name": "f.txt"}},
        {"type": "text-plain", "text": LINE, "mime_type": "text/plain", "title": "falcon.txt"},
    ],
    ids=["pdf", "docx, agent chat ui", "markdown", "html", "text", "text-plain block"],
)
def test_a_document_in_the_message_is_ingested_at_the_door_in_the_tenants_namespace(
    aegra: tuple[TestClient, Runs], block: dict[str, Any]
) -> None:
    http, runs = aegra
    status, out = turn(http, "t-doc", [WORDS, block])
    assert status == 200, out
    doc_id = out["doc_id"]
    assert find_document("team-b", doc_id) is not None and find_document("team-a", doc_id) is None
    # What Aegra receives (and keeps as the run's record and first checkpoint) names the document, never its content.
    record = json.dumps(runs.records[-1])
    content = str(block.get("base64") or block.get("data") or block.get("text"))
    assert content[:40] not in record and "Bob Chen" not in record
    sent = runs.records[-1]["input"]["messages"][0]["content"][1]
    assert sent["file_id"] == doc_id and sent["extras"]["ingested"] is True
    assert runs.records[-1]["context"]["namespace"] == "team-b"
    # One answer message, ending with its sources; the human message keeps a note in the file's place.
    assert [m["type"] for m in out["messages"]] == ["human", "ai"]
    reply = out["messages"][-1]
    assert "Bob Chen" in reply["content"] and "\n\n**Sources**\n- " in reply["content"]
    assert f"document {doc_id}, 1 chunk]" in json.dumps(out["messages"][0]["content"])
    again_status, again = turn(http, "t-doc", "When do the trials start?")
    assert again_status == 200 and again["turn"] == 2 and again["doc_id"] == doc_id
    assert [m["type"] for m in again["messages"]] == ["human", "ai"] * 2


def test_a_document_goes_to_the_tenants_other_namespace_when_the_chat_names_it(aegra: tuple[TestClient, Runs]) -> None:
    http, _ = aegra
    block = {"type": "text-plain", "text": LINE, "mime_type": "text/plain"}
    status, out = turn(http, "t-old", [WORDS, block], context={"namespace": "team-b-old"})
    assert status == 200 and find_document("team-b-old", out["doc_id"]) is not None
    assert find_document("team-b", out["doc_id"]) is None


@pytest.mark.parametrize(
    ("block", "extra", "status", "said"),
    [
        (
            {
                "type": "file",
                "base64": _b64(pdf_with_text(LINE)),
                "mime_type": "application/pdf",
                "extras": {"filename": "big.pdf"},
            },
            {},
            413,
            "big.pdf: ",
        ),
        (
            {"type": "file", "base64": _b64(docx_bytes([LINE])), "mime_type": DOCX, "extras": {"filename": "zip.docx"}},
            {"env": {"LONGDOC_MAX_BYTES": "100000"}},
            413,
            "zip.docx: the .docx holds ",
        ),
        (
            {"type": "text-plain", "text": LINE * 10, "mime_type": "text/plain", "title": "long.txt"},
            {},
            413,
            "text is larger than the 300 byte limit (LONGDOC_MAX_BYTES)",
        ),
        (
            {
                "type": "file",
                "base64": _b64(b"a,b\n1,2\n"),
                "mime_type": "text/csv",
                "extras": {"filename": "sheet.csv"},
            },
            {},
            400,
            "sheet.csv: unsupported type text/csv; attach a PDF, DOCX, HTML, Markdown or text file",
        ),
        (
            {"type": "image", "base64": _b64(b"\x89PNG...."), "mime_type": "image/png"},
            {},
            400,
            "image/png files are not read",
        ),
        (
            {"type": "file", "url": "http://127.0.0.1:9/x.pdf", "mime_type": "application/pdf"},
            {},
            400,
            "not fetched from links",
        ),
        (
            {
                "type": "file",
                "base64": "!!not base64!!",
                "mime_type": "application/pdf",
                "extras": {"filename": "x.pdf"},
            },
            {},
            400,
            "data is not valid base64",
        ),
        (
            {"type": "text-plain", "text": LINE, "mime_type": "text/plain"},
            {"context": {"namespace": "team-a"}},
            403,
            "namespace 'team-a' is not open to this API key",
        ),
    ],
    ids=[
        "too big",
        "an archive of too many files",
        "too big a text",
        "wrong type",
        "an image",
        "a link",
        "broken base64",
        "another tenant's namespace",
    ],
)
def test_a_refused_attachment_is_a_4xx_with_its_reason_before_any_run(
    aegra: tuple[TestClient, Runs],
    monkeypatch: pytest.MonkeyPatch,
    block: dict[str, Any],
    extra: dict[str, Any],
    status: int,
    said: str,
) -> None:
    env = {"LONGDOC_MAX_BYTES": "300", "LONGDOC_MAX_ARCHIVE_MEMBERS": "2", **extra.pop("env", {})}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    http, runs = aegra
    got, out = turn(http, "t-refused", [WORDS, block], **extra)
    assert got == status and said in out["message"], out
    assert runs.records == [] and list_documents("team-a") == list_documents("team-b") == []
    # Nothing of the refused request stays: the thread's next turn is its first.
    ok, first = turn(http, "t-refused", [WORDS, {"type": "text-plain", "text": LINE, "mime_type": "text/plain"}])
    assert ok == 200 and first["turn"] == 1


def test_a_file_in_a_state_update_is_ingested_at_the_door_too(aegra: tuple[TestClient, Runs]) -> None:
    http, runs = aegra
    block = {"type": "file", "base64": _b64(LINE.encode()), "mime_type": "text/csv", "extras": {"filename": "s.csv"}}
    update = {"messages": [{"type": "human", "content": [WORDS, block]}]}
    answer = http.post(
        "/threads/t-cmd/runs/wait",
        json={"assistant_id": "chat", "command": {"update": update}},
        headers={"X-API-Key": "key-b"},
    )
    assert answer.status_code == 400 and "s.csv: unsupported type text/csv" in answer.json()["message"]
    assert runs.records == []


def test_a_first_turn_without_a_document_is_answered_with_what_to_attach(aegra: tuple[TestClient, Runs]) -> None:
    http, _ = aegra
    doc_id = ingest(text=f"# Falcon report\n\n{LINE}\n", namespace="team-b").doc_id
    ingest(text="# Heron notes\n\nHerons wade in shallow water.\n", namespace="team-a")
    status, out = turn(http, "t-help", "Who manages procurement?")
    assert status == 200 and [m["type"] for m in out["messages"]] == ["human", "ai"]
    assert out["messages"][0]["content"] == "Who manages procurement?"  # the message stays in the conversation
    help_text = out["messages"][-1]["content"]
    assert help_text.startswith("To talk about a document, attach it to your message")
    assert f"Falcon report (`{doc_id}`)" in help_text and "Heron" not in help_text  # the tenant's documents only
    assert "give one of doc_id, path or text" not in help_text and out["messages"][-1]["additional_kwargs"]["longdoc"]
    # The next message, naming the document by its id, starts the conversation.
    status, out = turn(http, "t-help", f"What does {doc_id} say about procurement?")
    assert status == 200 and out["turn"] == 1 and out["doc_id"] == doc_id
    assert [m["type"] for m in out["messages"]] == ["human", "ai"] * 2


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Runs]]:
    """``deploy.app`` (its guard, ``/mcp`` and ``/a2a``), whose tool calls and A2A turns reach :class:`Runs` through
    the guard, with the caller's key, where they would reach the instance's own loopback address."""
    import httpx
    import langgraph_sdk
    from langgraph_sdk.client import LangGraphClient

    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    keyring.cache_clear()
    door._owners.cache_clear()
    runs = Runs()
    behind = door.TenantGuard(runs)

    def loopback(url: str, api_key: str | None = None, timeout: Any = None, **_: Any) -> LangGraphClient:
        assert url.startswith("http://127.0.0.1:") or url == "http://testserver:80", url
        headers = {"x-api-key": api_key} if api_key else {}
        transport = httpx.ASGITransport(app=behind)
        return LangGraphClient(httpx.AsyncClient(transport=transport, base_url=url, headers=headers, timeout=timeout))

    monkeypatch.setattr(langgraph_sdk, "get_client", loopback)
    with TestClient(door.app) as http:
        yield http, runs
    keyring.cache_clear()
    door._owners.cache_clear()


def tool_call(http: TestClient, name: str, arguments: dict[str, Any], key: str = "key-b") -> dict[str, Any]:
    """One MCP ``tools/call`` on the deployment's ``/mcp``: its result."""
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {"X-API-Key": key, "Accept": "application/json, text/event-stream"}
    answer = http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


def a2a_turn(http: TestClient, parts: list[dict[str, Any]], key: str = "key-b") -> dict[str, Any]:
    """One A2A ``SendMessage`` to the deployment's chat agent: the task it ends as."""
    message = {"role": "ROLE_USER", "parts": parts, "messageId": str(uuid.uuid4())}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = http.post("/a2a/chat", json=body, headers={"X-API-Key": key})
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"]["task"])


def test_mcp_tools_on_the_deployment_give_json_results_and_reasons(deployed: tuple[TestClient, Runs]) -> None:
    http, runs = deployed
    ingested = tool_call(http, "ingest", {"text": f"# Falcon report\n\n{LINE}\n"})
    assert ingested["isError"] is False and json.loads(ingested["content"][0]["text"]) == ingested["structuredContent"]
    doc_id = ingested["structuredContent"]["doc_id"]
    assert find_document("team-b", doc_id) is not None and runs.records[-1]["context"]["namespace"] == "team-b"

    chat = tool_call(http, "chat", {"question": "Who manages procurement?", "doc_id": doc_id})
    assert chat["isError"] is False and set(chat["structuredContent"]) == {
        "answer",
        "sources",
        "citations",
        "turn",
        "doc_id",
        "session",
    }
    assert "Bob Chen" in chat["structuredContent"]["answer"] and '"answer": ' in chat["content"][0]["text"]

    failures = [
        (("ask", {"question": "Who?"}, "key-b"), "ask failed: no document: give one of doc_id, path or text"),
        (
            ("ask", {"question": "Who?", "doc_id": doc_id}, "key-a"),
            f"ask failed: document {doc_id!r} is not ingested in namespace 'team-a'",
        ),
        (
            ("ask", {"question": "Who?", "doc_id": doc_id, "namespace": "team-a"}, "key-b"),
            "refused (403): namespace 'team-a' is not open to this API key",
        ),
        (("ask", {"question": "Who?", "doc_id": "not-an-id"}, "key-b"), "does not match '^[0-9a-f]{16}$'"),
    ]
    for (name, arguments, key), said in failures:
        result = tool_call(http, name, arguments, key)
        text = result["content"][0]["text"]
        assert result["isError"] is True and said in text, text
        assert "InputError" not in text and "Traceback" not in text


def test_a2a_on_the_deployment_takes_a_file_and_refuses_one_it_cannot_read(deployed: tuple[TestClient, Runs]) -> None:
    http, runs = deployed
    help_task = a2a_turn(http, [{"text": "What is new?"}])
    assert help_task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert help_task["artifacts"][0]["parts"][0]["text"].startswith("To talk about a document, attach it")

    pdf = _b64(pdf_with_text(LINE))
    parts = [{"text": "Who manages procurement?"}, {"raw": pdf, "mediaType": "application/pdf", "filename": "f.pdf"}]
    task = a2a_turn(http, parts)
    answer = task["artifacts"][0]["parts"][0]["text"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and "Bob Chen" in answer and "**Sources**" in answer
    assert pdf[:40] not in json.dumps(runs.records[-1]) and list_documents("team-b")

    sheet = [{"text": "Sum it up"}, {"raw": _b64(b"a,b\n1,2\n"), "mediaType": "text/csv", "filename": "sheet.csv"}]
    rejected = a2a_turn(http, sheet)
    said = rejected["status"]["message"]["parts"][0]["text"]
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
    assert said.startswith("refused (400): sheet.csv: unsupported type text/csv; attach a PDF"), said


def across(messages: Any) -> str:
    """A scripted reply that answers from one detail line of each document in the prompt (tags ``1:``, ``2:``)."""
    found = _detail_lines(str(messages[-1].content))
    if '"answer"' not in str(messages[0].content) or not found:
        return offload_reply(messages)
    first: dict[str, tuple[str, str]] = {}
    for cid, text in found:
        first.setdefault(cid.split(":")[0], (cid, text))
    picked = sorted(first.values())
    answer = " ".join(f"{text.split('.')[0]}. [{cid}]" for cid, text in picked)
    reply: dict[str, Any] = {"recall": []} if '"recall"' in str(messages[0].content) else {}
    return json.dumps({**reply, "answer": answer, "citations": [cid for cid, _ in picked]})


def test_several_files_in_one_message_make_the_chats_collection(
    aegra: tuple[TestClient, Runs],
) -> None:
    http, runs = aegra
    runs.model = lambda: ScriptedChatModel(default=across)
    files = [
        {
            "type": "file",
            "base64": _b64(pdf_with_text(LINE)),
            "mime_type": "application/pdf",
            "extras": {"filename": "falcon.pdf"},
        },
        {
            "type": "file",
            "base64": _b64(b"# Herons\n\nHerons wade in shallow water at dawn.\n"),
            "mime_type": "text/markdown",
            "extras": {"filename": "herons.md"},
        },
    ]
    status, out = turn(
        http, "t-many", [{"type": "text", "text": "Who manages procurement, and where do herons wade?"}, *files]
    )
    assert status == 200, out
    sent = runs.records[-1]["input"]["messages"][0]["content"][1:]
    ids = [block["file_id"] for block in sent]
    assert len(set(ids)) == 2 and all(find_document("team-b", i) for i in ids)  # both ingested at the door
    assert sorted(d["doc_id"] for d in out["documents"]) == sorted(ids)
    # the answer draws on both documents, and its sources name each
    reply = out["messages"][-1]
    titles = {s["title"] for s in reply["additional_kwargs"]["longdoc"]["sources"]}
    assert titles == {d["title"] for d in out["documents"]} and len(titles) == 2
    assert "Bob Chen" in reply["content"] and "Herons wade" in reply["content"]
    kept = json.dumps(out["messages"][0]["content"])
    assert "[attached falcon.pdf: document " in kept and "[attached herons.md: document " in kept
    status, again = turn(http, "t-many", "When do the trials start?")
    assert status == 200 and again["turn"] == 2 and again["documents"] == out["documents"]
    assert [m["type"] for m in again["messages"]] == ["human", "ai"] * 2
