"""The scale-out deployment's door in process: chat turns with documents attached, refusals, MCP and A2A calls.

The door is the real :class:`deploy.app.TenantGuard` (and, for MCP and A2A, the real ``deploy.app`` routes);
behind it, in Aegra's place, a small ASGI app (:class:`Runs`) runs the served graphs (scripted model, hash
embeddings, an in-memory checkpointer) on the run endpoints those callers use, with the body the guard passed
on, and keeps that body as Aegra keeps a run's record (streamed runs too). MCP and A2A are called as raw
JSON-RPC and through the official MCP client, ``langchain-mcp-adapters`` and the official A2A client, over an
ASGI transport. ``tests/integration/test_scaleout.py`` runs the same calls on two real Aegra instances with
PostgreSQL.
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
RUN_STREAM = re.compile(r"^/threads/(?P<thread>[^/]+)/runs/stream$")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _message(message: BaseMessage) -> dict[str, Any]:
    return {
        "type": message.type,
        "id": message.id,
        "content": message.content,
        "additional_kwargs": message.additional_kwargs,
    }


def _json(value: Any) -> Any:
    """A streamed value as the server sends it: messages as their dicts, anything else as text."""
    return _message(value) if isinstance(value, BaseMessage) else str(value)


def _event(name: str, data: Any) -> dict[str, Any]:
    body = f"event: {name}\ndata: {json.dumps(data, default=_json)}\n\n".encode()
    return {"type": "http.response.body", "body": body, "more_body": True}


class Runs:
    """Aegra's place behind the guard: ``POST /threads``, runs made and waited for, streamed, joined and looked up.

    A run's graph runs to its end when the run is made; a failed run has status ``error`` and its exception's text
    as ``error_message``, as Aegra records it. Each run request the guard passed on is kept (:attr:`records`).
    """

    def __init__(self) -> None:
        self.saver = InMemorySaver()
        self.records: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}
        self.model: Any = offload_chat_model
        """What plays the model: a factory of scripted chat models."""
        self.door = True
        """Whether the deployment's own calls pass the guard (see the ``loopback`` fixture)."""

    async def run(self, thread: str, request: dict[str, Any]) -> dict[str, Any]:
        self.records.append(request)
        workflow = str(assistants.workflow_of(str(request["assistant_id"])))
        graph = registry.compile_with(workflow, self.saver)
        config = {"configurable": {"thread_id": thread}}
        run: dict[str, Any] = {"run_id": str(uuid.uuid4()), "thread_id": thread, "status": "success", "values": {}}
        try:
            with use_chat_model(self.model()):
                values = await graph.ainvoke(request.get("input"), config, context=request.get("context") or {})
        except Exception as exc:  # noqa: BLE001 - a failed run, recorded as Aegra records it
            run.update(status="error", error_message=str(exc))
        else:
            messages = [_message(m) for m in values.get("messages", [])]
            run["values"] = {**{k: v for k, v in values.items() if k != "messages"}, "messages": messages}
        self.runs[run["run_id"]] = run
        return run

    async def stream(self, thread: str, request: dict[str, Any], send: Any) -> None:
        """A run streamed as server-sent events in the modes it asks for, as the server streams one."""
        self.records.append(request)
        graph = registry.compile_with(str(assistants.workflow_of(str(request["assistant_id"]))), self.saver)
        modes = request.get("stream_mode") or ["values"]
        modes = [m.replace("messages-tuple", "messages") for m in ([modes] if isinstance(modes, str) else modes)]
        run_id = str(uuid.uuid4())
        self.runs[run_id] = {"run_id": run_id, "thread_id": thread, "status": "success", "values": {}}
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send(_event("metadata", {"run_id": run_id}))
        config = {"configurable": {"thread_id": thread}}
        try:
            with use_chat_model(self.model()):
                async for mode, chunk in graph.astream(
                    request.get("input"), config, context=request.get("context") or {}, stream_mode=modes
                ):
                    await send(_event(mode, list(chunk) if mode == "messages" else chunk))
        except Exception as exc:  # noqa: BLE001 - a failed run, streamed as the server streams it
            self.runs[run_id].update(status="error", error_message=str(exc))
            await send(_event("error", {"error": type(exc).__name__, "message": str(exc)}))
        await send({"type": "http.response.body", "body": b""})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        made, looked_up, streamed = RUN.match(path), RUN_STATUS.match(path), RUN_STREAM.match(path)
        if method == "POST" and streamed is not None:
            await self.stream(streamed["thread"], json.loads(body), send)
            return
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


@pytest.mark.parametrize(
    ("env", "said"), [("LONGDOC_MAX_ATTACHMENTS", "this one attaches 3"), ("LONGDOC_MAX_ATTACHMENT_BYTES", "")]
)
def test_a_message_over_the_attachment_bounds_is_a_413_before_any_document_is_read(
    aegra: tuple[TestClient, Runs], monkeypatch: pytest.MonkeyPatch, env: str, said: str
) -> None:
    monkeypatch.setenv(env, "2" if env == "LONGDOC_MAX_ATTACHMENTS" else str(2 * len(LINE)))
    http, runs = aegra
    notes = [{"type": "text-plain", "text": f"{LINE} {i}", "mime_type": "text/plain"} for i in range(3)]
    got, out = turn(http, "t-many", [WORDS, *notes])
    assert got == 413 and env in out["message"] and said in out["message"], out
    assert runs.records == [] and list_documents("team-b") == []
    update = {"assistant_id": "chat", "command": {"update": {"messages": [{"type": "human", "content": notes}]}}}
    answer = http.post("/threads/t-many/runs/wait", json=update, headers={"X-API-Key": "key-b"})
    assert answer.status_code == 413 and list_documents("team-b") == []


def test_an_assistant_with_a_setting_its_workflow_does_not_read_is_a_400(monkeypatch: pytest.MonkeyPatch) -> None:
    from surfaces.assistant_settings import AssistantGuard

    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    keyring.cache_clear()
    made: list[Any] = []

    async def aegra(scope: Any, receive: Any, send: Any) -> None:
        made.append(json.loads((await receive())["body"]))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    http = TestClient(door.TenantGuard(AssistantGuard(aegra)))
    key = {"X-API-Key": "key-a"}
    for method, path, body in (
        ("POST", "/assistants", {"graph_id": "chat", "context": {"chunksize": 300}}),
        ("POST", "/assistants", {"graph_id": "chat", "config": {"configurable": {"modle": "other"}}}),
        ("PATCH", "/assistants/a1", {"graph_id": "ask", "context": {"keep_turns": 2}}),
    ):
        refused = http.request(method, path, json=body, headers=key)
        assert refused.status_code == 400, body
        said = refused.json()
        assert said["error"] == "refused" and f"{body['graph_id']} does not take " in said["message"], said
    assert made == []
    kept = {"graph_id": "chat", "context": {"keep_turns": 2, "namespace": "team-a", "model": "other"}}
    assert http.post("/assistants", json=kept, headers=key).status_code == 200 and made == [kept]  # Aegra says 403
    keyring.cache_clear()


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
def loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runs]:
    """:class:`Runs` where the deployment's MCP tool calls and A2A turns reach the instance's own loopback address:
    through the guard, with the caller's key (``runs.door`` False: straight to the runs, as on ``langgraph dev``,
    where the chat itself reads a file the door would refuse)."""
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
        transport = httpx.ASGITransport(app=behind if runs.door else runs)
        return LangGraphClient(httpx.AsyncClient(transport=transport, base_url=url, headers=headers, timeout=timeout))

    monkeypatch.setattr(langgraph_sdk, "get_client", loopback)
    yield runs
    keyring.cache_clear()
    door._owners.cache_clear()


@pytest.fixture
def deployed(loopback: Runs) -> Iterator[tuple[TestClient, Runs]]:
    """``deploy.app`` (its guard, ``/mcp`` and ``/a2a``), whose tool calls and A2A turns reach :class:`Runs` through
    the guard, with the caller's key, where they would reach the instance's own loopback address."""
    with TestClient(door.app) as http:
        yield http, loopback


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
    assert chat["structuredContent"].get("asked") == "Who manages procurement?"  # the question the turn read for
    assert chat["isError"] is False and set(chat["structuredContent"]) == {
        "answer",
        "asked",
        "sources",
        "citations",
        "turn",
        "doc_id",
        "documents",
        "thread_id",
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
    assert help_task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and "artifacts" not in help_task
    assert help_task["status"]["message"]["parts"][0]["text"].startswith("To talk about a document, attach it")

    pdf = _b64(pdf_with_text(LINE))
    parts = [{"text": "Who manages procurement?"}, {"raw": pdf, "mediaType": "application/pdf", "filename": "f.pdf"}]
    task = a2a_turn(http, parts)
    answer, data = task["artifacts"][0]["parts"][0]["text"], task["artifacts"][0]["parts"][1]["data"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and "Bob Chen" in answer and "**Sources**" in answer
    assert data["turn"] == 1 and data["sources"][0]["quote"] in answer and "message" not in task["status"]
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


APP = "http://127.0.0.1:8000"
"""Where the in-process clients below address the deployment (``deploy.app`` over an ASGI transport)."""


def with_mcp_client(key: str, work: Any) -> Any:
    """``await work(session, initialized)`` in a session of the official MCP client on the deployment's ``/mcp``,
    with ``key`` (``initialized``: the server's answer to the client's ``initialize``)."""
    import asyncio

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from deploy import mcp as served

    async def run() -> Any:
        transport = httpx.ASGITransport(app=door.app)
        async with (
            served.route.running(),
            httpx.AsyncClient(transport=transport, base_url=APP, headers={"X-API-Key": key}, timeout=30) as http,
            streamable_http_client(f"{APP}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            initialized = await session.initialize()
            return await work(session, initialized)

    return asyncio.run(run())


def test_the_mcp_server_tells_clients_the_products_name_and_version() -> None:
    import importlib.metadata

    async def work(_session: Any, initialized: Any) -> Any:
        return initialized.serverInfo

    info = with_mcp_client("key-b", work)
    assert (info.name, info.version) == ("longdoc", importlib.metadata.version("longdoc"))
    assert info.version != importlib.metadata.version("mcp")


def text_of(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def test_mcp_tools_declare_their_results_what_they_change_and_no_other_argument(loopback: Runs) -> None:
    import jsonschema

    async def work(session: Any, _initialized: Any) -> Any:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        ingested = await session.call_tool("ingest", {"text": f"# Falcon report\n\n{LINE}\n"})
        doc_id = ingested.structuredContent["doc_id"]
        stray = await session.call_tool("ask", {"question": "Who?", "doc_id": doc_id, "top_k": 3})
        session_back = await session.call_tool("chat", {"question": "Who?", "doc_id": doc_id, "session": "s1"})
        return listed, ingested, stray, session_back

    listed, ingested, stray, session_back = with_mcp_client("key-b", work)
    assert list(listed) == [*registry.WORKFLOWS, "documents"]
    for name, tool in listed.items():
        assert tool.outputSchema["type"] == "object" and tool.outputSchema["properties"], name
        assert set(tool.outputSchema["required"]) <= set(tool.outputSchema["properties"]), name
        assert tool.inputSchema["additionalProperties"] is False, name
        assert tool.annotations is not None and tool.annotations.openWorldHint is False, name
    hints = {name: listed[name].annotations for name in listed}
    assert all(hints[name].readOnlyHint is True for name in ("ask", "summarize", "route", "documents"))
    # ingesting a changed file again removes its earlier version
    assert (hints["ingest"].readOnlyHint, hints["ingest"].destructiveHint, hints["ingest"].idempotentHint) == (
        False,
        True,
        True,
    )
    assert hints["chat"].readOnlyHint is False and hints["chat"].idempotentHint is False
    assert "messages" not in listed["chat"].outputSchema["properties"]
    # the client checked the result against the tool's output schema; it holds what the schema says, nothing else
    folder_only = {"files", "failed"}  # an ingest of text holds every field of the result but a folder's
    assert not ingested.isError
    assert set(ingested.structuredContent) == set(listed["ingest"].outputSchema["properties"]) - folder_only
    jsonschema.validate(ingested.structuredContent, listed["ingest"].outputSchema)
    said = text_of(stray)
    assert stray.isError and said.startswith("ask does not take 'top_k'; its arguments: doc_id, question, "), said
    assert session_back.isError and "does not take 'session' (a conversation goes on with thread_id)" in text_of(
        session_back
    )
    assert [r["input"].get("question") for r in loopback.records if r["assistant_id"] != "ingest"] == []


def test_an_mcp_chat_goes_on_with_the_thread_id_it_returned(loopback: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(door, "_aegra_owner", lambda thread_id: "team-b")  # Aegra's thread table: team-b's threads
    doc_id = ingest(text=f"# Falcon report\n\n{LINE}\n", namespace="team-b").doc_id

    async def work(session: Any, _initialized: Any) -> Any:
        first = await session.call_tool("chat", {"question": "Who manages procurement?", "doc_id": doc_id})
        thread = first.structuredContent["thread_id"]
        second = await session.call_tool("chat", {"question": "When do the trials start?", "thread_id": thread})
        return first, second

    first, second = with_mcp_client("key-b", work)
    assert not first.isError and not second.isError, text_of(second)
    one, two = first.structuredContent, second.structuredContent
    assert one["turn"] == 1 and two["turn"] == 2 and two["thread_id"] == one["thread_id"] and two["doc_id"] == doc_id
    assert "session" not in one and two["answer"]

    async def foreign(session: Any, _initialized: Any) -> Any:
        return await session.call_tool("chat", {"question": "And the budget?", "thread_id": one["thread_id"]})

    other = with_mcp_client("key-a", foreign)  # another tenant's conversation is one that does not exist
    assert other.isError and text_of(other).startswith("refused (404): "), text_of(other)


def test_the_documents_tool_lists_the_callers_own_documents(loopback: Runs) -> None:
    mine = ingest(text=f"# Falcon report\n\n{LINE}\n", namespace="team-b").doc_id
    old = ingest(text="# Old minutes\n\nThe board met in May.\n", namespace="team-b-old").doc_id
    ingest(text="# Heron notes\n\nHerons wade in shallow water.\n", namespace="team-a")

    async def work(session: Any, _initialized: Any) -> Any:
        calls = ({}, {"namespace": "team-b-old"}, {"namespace": "team-a"})
        return [await session.call_tool("documents", arguments) for arguments in calls]

    own, other_namespace, foreign = with_mcp_client("key-b", work)
    assert own.structuredContent["namespace"] == "team-b"
    assert [(d["doc_id"], d["title"]) for d in own.structuredContent["documents"]] == [(mine, "Falcon report")]
    assert [d["doc_id"] for d in other_namespace.structuredContent["documents"]] == [old]
    assert foreign.isError and text_of(foreign) == "refused (403): namespace 'team-a' is not open to this API key"
    assert loopback.records == []  # a listing runs nothing


def test_a_call_with_a_progress_token_hears_each_step_of_its_run(loopback: Runs) -> None:
    heard: list[tuple[float, str]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, str(message)))

    text = "# Falcon report\n\n" + "\n\n".join(f"## Part {i}\n\n{LINE} Item {i} ships in week {i}." for i in range(40))

    async def work(session: Any, _initialized: Any) -> Any:
        ingested = await session.call_tool("ingest", {"text": text}, progress_callback=progress)
        heard.append((0, "--"))
        doc_id = ingested.structuredContent["doc_id"]
        chatted = await session.call_tool(
            "chat", {"question": "Who manages procurement?", "doc_id": doc_id}, progress_callback=progress
        )
        return ingested, chatted

    ingested, chatted = with_mcp_client("key-b", work)
    assert not ingested.isError and not chatted.isError, text_of(chatted)
    cut = heard.index((0, "--"))
    ingesting, chatting = heard[:cut], heard[cut + 1 :]
    chunks = ingested.structuredContent["chunks"]
    assert chunks > 16 and f"ingesting: {chunks} of {chunks} chunks embedded" in [m for _, m in ingesting]
    assert any(m.startswith("ingesting: 16 of ") for _, m in ingesting) and ingesting[-1][1] == "document ingested"
    said = [m for _, m in chatting]
    assert said[0] == "message taken" and "answer written" in said
    for steps in (ingesting, chatting):
        assert [done for done, _ in steps] == list(range(1, len(steps) + 1))  # progress only goes up


def a2a_conversation(key: str, turns: list[list[dict[str, Any]]], url: str = f"{APP}/a2a/chat") -> list[list[Any]]:
    """The official A2A client (streaming, as its card allows) holding one conversation with the deployment's chat
    agent, found from ``url``: every event of each turn, as JSON."""
    import asyncio

    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, SendMessageRequest
    from google.protobuf.json_format import MessageToDict, ParseDict

    async def run() -> list[list[Any]]:
        transport = httpx.ASGITransport(app=door.app)
        async with httpx.AsyncClient(transport=transport, headers={"X-API-Key": key}, timeout=30) as http:
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(url)
            context, out = "", []
            for parts in turns:
                message: dict[str, Any] = {"role": "ROLE_USER", "parts": parts, "messageId": str(uuid.uuid4())}
                if context:
                    message["contextId"] = context
                request = SendMessageRequest(message=ParseDict(message, Message()))
                events = [MessageToDict(e) async for e in client.send_message(request)]
                context = next((e["task"]["contextId"] for e in events if "task" in e), context)
                out.append(events)
            return out

    return asyncio.run(run())


def final_status(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The status a streamed turn ended with."""
    last = events[-1]
    return dict((last.get("statusUpdate") or last.get("task") or {})["status"])


def test_an_a2a_turn_ends_as_input_required_or_rejected_when_it_is_no_answer(loopback: Runs) -> None:
    doc_id = ingest(text=f"# Falcon report\n\n{LINE}\n", namespace="team-b").doc_id
    ask_first, then_named = a2a_conversation(
        "key-b", [[{"text": "Who manages procurement?"}], [{"text": "This one."}, {"data": {"doc_id": doc_id}}]]
    )
    status = final_status(ask_first)
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED" and not any("artifactUpdate" in e for e in ask_first)
    asked = status["message"]["parts"][0]["text"]
    assert asked.startswith("To talk about a document, attach it") and doc_id in asked
    # the user supplies what was missing in the same context, and the conversation starts
    assert final_status(then_named)["state"] == "TASK_STATE_COMPLETED"
    assert then_named[0]["task"]["contextId"] == ask_first[0]["task"]["contextId"]

    (unknown,) = a2a_conversation("key-b", [[{"text": "Who?"}, {"data": {"doc_id": "0123456789abcdef"}}]])
    status = final_status(unknown)
    assert status["state"] == "TASK_STATE_REJECTED" and not any("artifactUpdate" in e for e in unknown)
    assert status["message"]["parts"][0]["text"] == "document '0123456789abcdef' is not ingested in namespace 'team-b'"
    sent = a2a_turn(http=TestClient(door.app), parts=[{"text": "Who?"}, {"data": {"doc_id": "0123456789abcdef"}}])
    assert sent["status"]["state"] == "TASK_STATE_REJECTED" and "artifacts" not in sent


def test_an_unreadable_file_the_chat_itself_refuses_is_a_rejected_task(loopback: Runs) -> None:
    loopback.door = False  # as on langgraph dev: the chat reads the file (Aegra's door refuses it with a 400)
    image = {"raw": _b64(b"\x89PNG...."), "mediaType": "image/png", "filename": "shot.png"}
    (events,) = a2a_conversation("key-b", [[{"text": "What is this?"}, image]])
    status = final_status(events)
    assert status["state"] == "TASK_STATE_REJECTED" and not any("artifactUpdate" in e for e in events)
    assert "image/png files are not read" in status["message"]["parts"][0]["text"]


def test_a_streamed_a2a_answer_ends_with_a_last_chunk_holding_its_sources_as_data(loopback: Runs) -> None:
    pdf = {"raw": _b64(pdf_with_text(LINE)), "mediaType": "application/pdf", "filename": "falcon.pdf"}
    turns = [[{"text": "Who manages procurement?"}, pdf], [{"text": "When do the trials start?"}]]
    for events in a2a_conversation("key-b", turns):
        updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
        assert len(updates) >= 2 and [u.get("lastChunk", False) for u in updates] == [False] * (len(updates) - 1) + [
            True
        ]
        text = "".join(p.get("text", "") for u in updates for p in u["artifact"]["parts"])
        data = [p["data"] for u in updates for p in u["artifact"]["parts"] if "data" in p]
        assert "\n\n**Sources**\n- " in text and len(data) == 1 and "data" in updates[-1]["artifact"]["parts"][-1]
        sources = data[0]["sources"]
        assert sources and all(f"[{s['label']}]" in text for s in sources) and data[0]["citations"]
        status = final_status(events)
        assert status["state"] == "TASK_STATE_COMPLETED" and "message" not in status  # the answer is not repeated


def test_the_agent_card_is_at_the_servers_root_too(deployed: tuple[TestClient, Runs]) -> None:
    http, _ = deployed
    assert http.get("/.well-known/agent-card.json").status_code == 401  # behind the keys like every path
    root = http.get("/.well-known/agent-card.json", headers={"X-API-Key": "key-b"})
    at_chat = http.get("/a2a/chat/.well-known/agent-card.json", headers={"X-API-Key": "key-b"})
    assert root.status_code == 200 and root.json() == at_chat.json()
    assert root.json()["supportedInterfaces"][0]["url"] == "http://testserver/a2a/chat"
    (events,) = a2a_conversation("key-b", [[{"text": "Hello"}]], url=APP)  # the client finds the agent from the root
    assert final_status(events)["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_langchain_mcp_adapters_tools_carry_the_hints_the_progress_and_the_conversation(loopback: Runs) -> None:
    """The tools as a LangGraph agent loads them: annotations as metadata, progress to the client's callback, and
    a chat that goes on by the thread_id of the previous turn's structured result."""
    import asyncio

    import httpx
    from langchain_mcp_adapters.callbacks import CallbackContext, Callbacks
    from langchain_mcp_adapters.client import MultiServerMCPClient

    from deploy import mcp as served

    heard: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None, context: CallbackContext) -> None:
        heard.append(f"{context.tool_name}: {message}")

    def client(
        headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None, auth: httpx.Auth | None = None
    ) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=door.app)
        return httpx.AsyncClient(transport=transport, headers=headers, timeout=timeout or 30, auth=auth)

    async def run() -> Any:
        server = {
            "url": f"{APP}/mcp",
            "transport": "streamable_http",
            "headers": {"X-API-Key": "key-b"},
            "httpx_client_factory": client,
        }
        async with served.route.running():
            mcp_client = MultiServerMCPClient({"longdoc": server}, callbacks=Callbacks(on_progress=on_progress))
            tools = {t.name: t for t in await mcp_client.get_tools()}
            ingested = await tools["ingest"].ainvoke({"text": f"# Falcon report\n\n{LINE}\n"})
            doc_id = json.loads(ingested[0]["text"])["doc_id"]
            call = {"name": "chat", "type": "tool_call", "id": "c1"}
            first = await tools["chat"].ainvoke({**call, "args": {"question": "Who buys?", "doc_id": doc_id}})
            thread = first.artifact["structured_content"]["thread_id"]
            second = await tools["chat"].ainvoke({**call, "args": {"question": "And then?", "thread_id": thread}})
            return tools, first, second

    tools, first, second = asyncio.run(run())
    assert tools["ask"].metadata["readOnlyHint"] is True and tools["ingest"].metadata["idempotentHint"] is True
    assert tools["chat"].metadata["readOnlyHint"] is False
    assert "ingest: ingesting: 1 of 1 chunks embedded" in heard and "chat: answer written" in heard
    assert first.artifact["structured_content"]["turn"] == 1 and second.artifact["structured_content"]["turn"] == 2
    assert second.artifact["structured_content"]["thread_id"] == first.artifact["structured_content"]["thread_id"]
