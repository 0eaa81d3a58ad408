"""The clients people point at a LangGraph server, against ``langgraph dev`` with the scripted model.

Studio's chat view and Agent Chat UI (``langgraph_sdk``: a thread, ``runs.stream`` in
``messages-tuple`` mode, two turns), the official ``mcp`` client and ``langchain-mcp-adapters`` on
``/mcp``, and an A2A caller on ``/a2a``. The server runs on 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from doubles.endpoint import Script, create_app, running
from tests.integration import clients
from tests.integration.conftest import ROOT, copy_project, free_port, wait_http

FALCON = (ROOT / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent))

pytestmark = pytest.mark.skipif(LANGGRAPH is None, reason="the langgraph CLI is not installed (make install)")


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
        port = free_port()
        log = folder / "dev.log"
        args = [LANGGRAPH, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"]
        proc = subprocess.Popen(args, env=env, cwd=work, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                wait_http(f"{url}/ok", timeout=180, proc=proc)
            except (TimeoutError, RuntimeError):
                pytest.fail(log.read_text(errors="replace")[-3000:])
            client = clients.sdk(url)
            doc_id = client.runs.wait(None, "ingest", input={"text": FALCON, "title": "falcon"})["doc_id"]
            yield {"url": url, "client": client, "doc_id": doc_id, "log": log}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


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


def test_the_first_message_may_name_a_file_under_the_ingest_root(server: dict[str, Any]) -> None:
    client = server["client"]
    thread = client.threads.create()["thread_id"]
    turn = clients.chat_turn(client, thread, "In falcon.md, who manages procurement?")
    assert clients.check_chat_turn(turn, 1)["additional_kwargs"]["longdoc"]["doc_id"] == server["doc_id"]
    outside = client.threads.create()["thread_id"]
    message = {"type": "human", "content": f"Read {ROOT}/README.md"}
    out = client.runs.wait(outside, "offload", input={"messages": [message]}, raise_error=False)
    assert "no document" in out["__error__"]["message"] and client.runs.list(outside)[0]["status"] == "error"
    assert client.threads.get_state(outside)["values"].get("messages") == []


def test_the_mcp_client_lists_and_calls_the_workflows(server: dict[str, Any]) -> None:
    doc_id = server["doc_id"]
    session = clients.mcp_session(server["url"], [clients.ask_chain(doc_id), ("chain", {"question": "Who?"})])
    assert session["info"].serverInfo.name
    assert {"ingest", "chain", "summarize", "offload", "route"} <= set(session["tools"])
    assert "question" in session["tools"]["chain"].inputSchema["properties"]
    good, bad = session["results"]
    assert not good.isError and "'answer':" in clients.text_of(good) and server["doc_id"] in clients.text_of(good)
    assert bad.isError and "InputError" in clients.text_of(bad)  # langgraph-api names the error's type only


def test_mcp_tools_serve_a_langgraph_agent(server: dict[str, Any]) -> None:
    messages = clients.adapters_agent(server["url"], server["doc_id"])
    calls = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(calls) == 1 and calls[0].name == "chain" and "'answer':" in str(calls[0].content)
    assert isinstance(messages[-1], AIMessage) and messages[-1].content.startswith("longdoc says:")


def test_an_a2a_caller_holds_a_conversation_with_the_chat_assistant(server: dict[str, Any]) -> None:
    client = server["client"]
    offload = next(a for a in client.assistants.search(graph_id="offload") if a["graph_id"] == "offload")
    url, assistant = server["url"], offload["assistant_id"]
    card = clients.httpx.get(f"{url}/a2a/{assistant}/.well-known/agent-card.json", timeout=30).json()
    assert card["name"]
    parts = [{"text": "Who manages procurement?"}, {"data": {"doc_id": server["doc_id"]}}]
    first = clients.a2a_send(url, assistant, parts)
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    second = clients.a2a_send(url, assistant, [{"text": "And the budget?"}], context_id=first["contextId"])
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    state = client.threads.get_state(first["contextId"])["values"]
    assert state["turn"] == 2 and clients.artifact_text(second) == state["messages"][-1]["content"]
    assert clients.artifact_text(first) == state["messages"][1]["content"]
