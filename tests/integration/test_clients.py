"""The clients people point at a LangGraph server, against ``langgraph dev`` with the scripted model.

Studio's chat view and Agent Chat UI (``langgraph_sdk``: a thread, ``runs.stream`` in
``messages-tuple`` mode, two turns), the official ``mcp`` client and ``langchain-mcp-adapters`` on
``/mcp``, and an A2A caller on ``/a2a``. The server runs on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from doubles.endpoint import Script, create_app, running
from doubles.files import pdf_with_text
from surfaces.registry import DESCRIPTIONS
from tests.integration import clients
from tests.integration.conftest import ROOT, copy_project, langgraph_dev

FALCON = (ROOT / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent))

pytestmark = [
    pytest.mark.skipif(LANGGRAPH is None, reason="the langgraph CLI is not installed (make install)"),
    pytest.mark.xdist_group("clients"),  # one server for the module, in one test process
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``langgraph dev`` on a free loopback port, its model the scripted endpoint; files readable under ``docs``."""
    assert LANGGRAPH is not None
    folder = tmp_path_factory.mktemp("dev")
    work, docs = folder / "srv", folder / "docs"
    docs.mkdir()
    (docs / "falcon.md").write_text(FALCON, encoding="utf-8")
    copy_project(work)
    with running(create_app(Script())) as endpoint:
        env = {
            **os.environ,
            "LONGDOC_HOME": str(folder / "home"),
            "LONGDOC_EMBEDDER": "hash",
            "LONGDOC_BASE_URL": f"{endpoint}/v1",
            "LONGDOC_MODEL": "scripted",
            "LONGDOC_INGEST_ROOT": str(docs),
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
        }
        log = folder / "dev.log"
        with langgraph_dev(LANGGRAPH, work, env, log) as url:
            client = clients.sdk(url)
            doc_id = client.runs.wait(None, "ingest", input={"text": FALCON, "title": "falcon"})["doc_id"]
            yield {"url": url, "client": client, "doc_id": doc_id, "log": log}


def test_a_studio_style_chat_streams_the_answer_over_two_turns(server: dict[str, Any]) -> None:
    client, doc_id = server["client"], server["doc_id"]
    thread = client.threads.create()["thread_id"]
    first = clients.chat_turn(client, thread, "Who manages procurement?", context={"doc_id": doc_id})
    reply = clients.check_chat_turn(first, 1)
    assert reply["additional_kwargs"]["longdoc"]["doc_id"] == doc_id
    second = clients.chat_turn(client, thread, "When do the field trials start?")
    clients.check_chat_turn(second, 2)
    state = client.threads.get_state(thread)["values"]
    assert [m["type"] for m in state["messages"]] == ["human", "ai", "human", "ai"]
    assert state["messages"][2]["content"] == "When do the field trials start?"


def test_a_pdf_dropped_into_the_chat_is_read_and_answered(server: dict[str, Any]) -> None:
    client = server["client"]
    thread = client.threads.create()["thread_id"]
    pdf = base64.b64encode(pdf_with_text("Bob Chen manages procurement. Field trials start in June.")).decode()
    # as Agent Chat UI sends an uploaded PDF
    block = {
        "type": "file",
        "source_type": "base64",
        "mime_type": "application/pdf",
        "data": pdf,
        "metadata": {"filename": "falcon-brief.pdf"},
    }
    turn = clients.chat_turn(client, thread, [{"type": "text", "text": "Who manages procurement?"}, block])
    reply = clients.check_chat_turn(turn, 1)
    assert "Bob Chen" in reply["content"] and reply["additional_kwargs"]["longdoc"]["doc_id"]
    kept = client.threads.get_state(thread)["values"]["messages"][0]["content"]
    assert pdf[:40] not in str(kept) and "[attached falcon-brief.pdf: document " in str(kept)
    refused = client.threads.create()["thread_id"]
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    out = clients.chat_turn(client, refused, [{"type": "text", "text": "What is this?"}, image])["values"]
    assert out["messages"][-1]["content"].startswith("I could not take this message: ")
    assert "image/png files are not read" in out["messages"][-1]["content"] and not out.get("turn")


def test_a_first_message_without_a_document_is_answered_with_what_to_attach(server: dict[str, Any]) -> None:
    client = server["client"]
    thread = client.threads.create()["thread_id"]
    out = clients.chat_turn(client, thread, "What does the report say?")["values"]
    assert [m["type"] for m in out["messages"]] == ["human", "ai"]
    assert (
        "attach it to your message" in out["messages"][-1]["content"]
        and server["doc_id"] in out["messages"][-1]["content"]
    )


def test_the_first_message_may_name_a_file_under_the_ingest_root(server: dict[str, Any]) -> None:
    client = server["client"]
    thread = client.threads.create()["thread_id"]
    turn = clients.chat_turn(client, thread, "In falcon.md, who manages procurement?")
    assert clients.check_chat_turn(turn, 1)["additional_kwargs"]["longdoc"]["doc_id"] == server["doc_id"]
    outside = client.threads.create()["thread_id"]
    message = {"type": "human", "content": f"Read {ROOT}/README.md"}
    out = client.runs.wait(outside, "chat", input={"messages": [message]})
    assert (
        "attach it to your message" in out["messages"][-1]["content"]
        and str(ROOT) not in out["messages"][-1]["content"]
    )
    refused = client.runs.wait(outside, "chat", input={"question": f"Read {ROOT}/README.md"}, raise_error=False)
    assert "no document" in refused["__error__"]["message"]  # a question field is answered with an error


def test_the_mcp_client_lists_and_calls_the_workflows(server: dict[str, Any]) -> None:
    doc_id = server["doc_id"]
    calls = [
        clients.ask_tool(doc_id),
        ("ask", {"question": "Who?"}),
        ("chat", {"question": "Who manages procurement?", "doc_id": doc_id}),
        ("chat", {"question": "When do the field trials start?", "thread_id": "<previous>"}),
        ("documents", {}),
        ("ask", {"question": "Who?", "doc_id": doc_id, "top_k": 3}),
    ]
    session = clients.mcp_session(server["url"], calls)
    assert session["info"].serverInfo.name == "longdoc"
    tools = session["tools"]
    assert list(tools) == ["ingest", "ask", "summarize", "chat", "route", "documents"]
    for name, tool in tools.items():
        assert tool.description == DESCRIPTIONS.get(name, tool.description) and tool.outputSchema, name
        assert tool.annotations is not None and tool.inputSchema["additionalProperties"] is False, name
        properties = tool.inputSchema["properties"]
        assert "messages" not in properties and all(p.get("description") for p in properties.values()), name
    good, bad, chat, again, listed, stray = session["results"]
    answer = json.loads(clients.text_of(good))  # JSON, not Python repr
    assert not good.isError and answer["doc_id"] == doc_id and answer["answer"] and answer["quotes"]
    assert good.structuredContent == answer and "tree" not in answer
    assert bad.isError and clients.text_of(bad) == "ask failed: no document: give one of doc_id, path or text"
    turn = json.loads(clients.text_of(chat))
    assert set(turn) == {"answer", "asked", "sources", "citations", "turn", "doc_id", "documents", "thread_id"}
    assert turn["turn"] == 1 and [d["doc_id"] for d in turn["documents"]] == [doc_id]
    assert not again.isError, clients.text_of(again)
    assert again.structuredContent["turn"] == 2  # the conversation went on
    assert again.structuredContent["thread_id"] == turn["thread_id"]
    assert doc_id in [d["doc_id"] for d in listed.structuredContent["documents"]]
    assert stray.isError and clients.text_of(stray).startswith("ask does not take 'top_k'; its arguments: doc_id")
    heard = session["progress"]
    assert "passages read" in heard[0] and heard[0][-1] == "answer written", heard[0]
    assert heard[2][0] == "message taken" and "answer written" in heard[2], heard[2]


def test_mcp_tools_serve_a_langgraph_agent(server: dict[str, Any]) -> None:
    messages = clients.adapters_agent(server["url"], server["doc_id"])
    calls = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(calls) == 1 and calls[0].name == "ask" and '"answer":' in str(calls[0].content)
    assert isinstance(messages[-1], AIMessage) and messages[-1].content.startswith("longdoc says:")


def test_an_a2a_caller_holds_a_conversation_with_the_chat_assistant(server: dict[str, Any]) -> None:
    client = server["client"]
    chat = next(a for a in client.assistants.search(graph_id="chat") if a["graph_id"] == "chat")
    url, assistant = server["url"], chat["assistant_id"]
    card = clients.httpx.get(f"{url}/a2a/{assistant}/.well-known/agent-card.json", timeout=30).json()
    assert card["name"] == "chat" and "needs a document" in card["description"] and card["skills"][0]["examples"]
    root = clients.httpx.get(f"{url}/.well-known/agent-card.json", timeout=30).json()
    assert root["supportedInterfaces"][0]["url"] == f"{url}/a2a/chat" and root["skills"] == card["skills"]
    image = {"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "shot.png"}
    rejected = clients.a2a_send(url, assistant, [{"text": "What is this?"}, image])
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED" and "artifacts" not in rejected
    assert "image/png files are not read" in rejected["status"]["message"]["parts"][0]["text"]
    parts = [{"text": "Who manages procurement?"}, {"data": {"doc_id": server["doc_id"]}}]
    first = clients.a2a_send(url, assistant, parts)
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    second = clients.a2a_send(url, assistant, [{"text": "And the budget?"}], context_id=first["contextId"])
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    state = client.threads.get_state(first["contextId"])["values"]
    assert state["turn"] == 2 and clients.artifact_text(second) == state["messages"][-1]["content"]
    assert clients.artifact_text(first) == state["messages"][1]["content"]


def test_the_official_a2a_client_streams_a_conversation_to_its_end(server: dict[str, Any]) -> None:
    pdf = base64.b64encode(pdf_with_text("Bob Chen manages procurement. Field trials start in June.")).decode()
    turns = [
        [{"text": "Hello, what can you do?"}],
        [{"text": "Who manages procurement?"}, {"raw": pdf, "mediaType": "application/pdf", "filename": "brief.pdf"}],
        [{"text": "And when do the trials start?"}],
    ]
    hello, first, second = clients.a2a_sdk_conversation(server["url"], "chat", turns)
    text, state = clients.streamed_answer(hello)
    asked = hello[-1]["statusUpdate"]["status"]["message"]["parts"][0]["text"]
    assert state == "TASK_STATE_INPUT_REQUIRED" and not text and "attach it to your message" in asked
    for events in (first, second):
        text, state = clients.streamed_answer(events)
        assert state == "TASK_STATE_COMPLETED" and "**Sources**" in text, events
        updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
        assert len(updates) >= 2 and updates[-1]["lastChunk"]  # the words as they came, then the last chunk
        sources = updates[-1]["artifact"]["parts"][-1]["data"]["sources"]
        assert sources and all(f"[{s['chunk_id']}]" in text for s in sources)
        assert "message" not in events[-1]["statusUpdate"]["status"]  # the answer is not said twice
    thread = next(e["task"]["contextId"] for e in second if "task" in e)
    values = server["client"].threads.get_state(thread)["values"]
    assert values["turn"] == 2 and clients.streamed_answer(second)[0] == values["messages"][-1]["content"]
