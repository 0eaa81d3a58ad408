"""The scale-out deployment's MCP and A2A routes: what they take from a request (no servers started)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from deploy import a2a, mcp
from deploy.app import app
from deploy.auth import keyring
from surfaces.registry import DESCRIPTIONS, WORKFLOWS


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps({"team-a": "key-a"}))
    keyring.cache_clear()
    with TestClient(app) as served:
        yield served
    keyring.cache_clear()


def test_the_routes_are_served_behind_the_guard(keyed: TestClient) -> None:
    card = "/a2a/chat/.well-known/agent-card.json"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert keyed.get(card).status_code == 401 and keyed.post("/mcp", json=initialize).status_code == 401
    assert keyed.post("/a2a/chat", json={}).status_code == 401
    key = {"X-API-Key": "key-a"}
    served = keyed.get(card, headers=key).json()
    assert served["supportedInterfaces"][0]["url"] == "http://testserver/a2a/chat" and served["name"] == "chat"
    former = keyed.get("/a2a/offload/.well-known/agent-card.json", headers=key).json()
    assert former["supportedInterfaces"][0]["url"] == "http://testserver/a2a/offload"  # the former id still serves
    assert keyed.get("/a2a/ask/.well-known/agent-card.json", headers=key).status_code == 404
    refused = keyed.post("/a2a/ask", json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage"}, headers=key)
    assert refused.json()["error"]["code"] == -32602 and refused.json()["id"] == 7
    wrong = keyed.post("/a2a/chat", json={"jsonrpc": "2.0", "id": 8, "method": "GetTask"}, headers=key)
    assert wrong.json()["error"]["code"] == -32601
    accept = {**key, "Accept": "application/json, text/event-stream"}
    tools = keyed.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=accept).json()
    listed = tools["result"]["tools"]
    assert [t["name"] for t in listed] == [*WORKFLOWS, "documents"]
    assert list(WORKFLOWS) == ["ingest", "ask", "summarize", "chat", "route"]
    assert [t["description"] for t in listed[:-1]] == [DESCRIPTIONS[name] for name in WORKFLOWS]
    for tool in listed:  # every field of every tool says what it is, with an example, as Aegra's /mcp lists it
        assert tool["inputSchema"] == mcp.input_schema(tool["name"])
        assert tool["outputSchema"] == mcp.output_schema(tool["name"]) and tool["annotations"]
        fields = tool["inputSchema"]["properties"].values()
        assert all(len(f["description"]) > 20 and f["examples"] for f in fields), tool["name"]
    ask = {t["name"]: t for t in listed}["ask"]["inputSchema"]["properties"]
    assert list(ask)[:2] == ["doc_id", "question"] and ask["doc_id"]["pattern"] == "^[0-9a-f]{16}$"


def test_the_agent_card_says_what_the_chat_does_and_that_it_needs_a_document() -> None:
    card = a2a.agent_card("http://127.0.0.1:8000/a2a/chat")
    assert card["name"] == "chat" and "needs a document" in card["description"]
    assert card["capabilities"]["streaming"] is True  # SendStreamingMessage is served
    skill = card["skills"][0]
    assert len(skill["examples"]) >= 3 and "application/pdf" in skill["inputModes"]
    from a2a.client.card_resolver import parse_agent_card

    parsed = parse_agent_card(card)  # the official SDK reads it as it is
    assert parsed.skills[0].examples[0] == skill["examples"][0] and parsed.capabilities.streaming


def test_tool_schemas_are_the_graph_inputs_without_the_transcript() -> None:
    for name in WORKFLOWS:
        schema = mcp.input_schema(name)
        assert schema["type"] == "object" and "messages" not in schema.get("properties", {})
        text = json.dumps(schema)
        assert "$defs" not in schema or "$ref" in text
    assert {"doc_id", "question"} <= set(mcp.input_schema("ask")["properties"])
    chat = mcp.input_schema("chat")
    assert {"doc_id", "question", "goal"} <= set(chat["properties"]) and chat["required"] == ["question"]


def test_tool_results_are_json_and_a_chat_turn_is_not_its_state() -> None:
    turn = {
        "answer": "Bob Chen.",
        "citations": ["c2"],
        "sources": [{"label": "c2.1"}],
        "turn": 1,
        "doc_id": "d",
        "memory": {"total": 900},
        "calls": [{"step": "answer"}],
        "history": [],
        "messages": [{"type": "ai"}],
    }
    assert mcp.tool_result("chat", {**turn, "session": "t0123:thread-1"}, "thread-1") == {
        "answer": "Bob Chen.",
        "sources": [{"label": "c2.1"}],
        "citations": ["c2"],
        "turn": 1,
        "doc_id": "d",
        "thread_id": "thread-1",
    }
    asked = mcp.tool_result("ask", {"answer": "Bob", "tree": [["c0", "c1", 0.5]], "notes": ["x"], "quotes": ["q"]})
    assert asked == {"answer": "Bob", "quotes": ["q"]}
    assert mcp.tool_result("ingest", {"doc_id": "d", "chunks": 3, "text": ""}) == {"doc_id": "d", "chunks": 3}


def test_a_failed_run_gives_its_reason() -> None:
    dev = {"__error__": {"error": "InputError", "message": "no document: give one of doc_id, path or text"}}
    assert mcp.failure(dev, {"status": "error"}) == "no document: give one of doc_id, path or text"
    assert mcp.failure({}, {"status": "error", "error_message": "document 'x' is not ingested"}).startswith("document")
    assert mcp.failure({"answer": "y"}, {"status": "success"}) is None


def test_tool_calls_go_to_the_socket_the_request_came_in_on() -> None:
    scope = {"server": ("127.0.0.1", 8123), "headers": [(b"host", b"attacker.example:80")]}
    assert mcp.own_url(scope) == "http://127.0.0.1:8123"
    assert mcp.own_url({"server": ("0.0.0.0", 9000)}) == "http://127.0.0.1:9000"


def test_an_a2a_message_becomes_a_turn() -> None:
    value = a2a.turn_input([{"text": "Who buys?"}, {"data": {"doc_id": "0123456789abcdef"}}, {"text": "Briefly."}])
    assert value == {"doc_id": "0123456789abcdef", "messages": [{"type": "human", "content": "Who buys?\nBriefly."}]}
    with_file = a2a.turn_input(
        [{"text": "Sum up"}, {"raw": "JVBERi0=", "mediaType": "application/pdf", "filename": "r.pdf"}]
    )
    assert with_file["messages"][0]["content"] == [
        {"type": "text", "text": "Sum up"},
        {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf", "extras": {"filename": "r.pdf"}},
    ]
    legacy = a2a.turn_input([{"file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "n.txt"}}])
    assert legacy["messages"][0]["content"][0]["extras"] == {"filename": "n.txt"}
    for parts, message in (
        ([{"data": {"doc_id": "x"}}], "no text or file part"),
        ([{"url": "file:///etc/passwd", "mediaType": "text/plain"}], "not fetched from a URL"),
        ([{"text": "a", "data": {}}], "exactly one of text, file"),
        ([{"text": "a"}, {"data": [1]}], "JSON object"),
    ):
        with pytest.raises(ValueError, match=message):
            a2a.turn_input(parts)


def test_every_input_field_says_what_it_is_with_an_example_and_its_bounds() -> None:
    for name in WORKFLOWS:
        properties = mcp.input_schema(name)["properties"]
        for field, spec in properties.items():
            assert len(spec.get("description", "")) > 20 and spec.get("examples"), (name, field)
    ask = mcp.input_schema("ask")["properties"]
    assert ask["doc_id"]["pattern"] == "^[0-9a-f]{16}$" and ask["question"]["maxLength"] == 4000
    assert (
        mcp.input_schema("summarize")["properties"]["length"] | {"minimum": 10, "maximum": 2000}
        == (mcp.input_schema("summarize")["properties"]["length"])
    )
    assert mcp.input_schema("ingest")["properties"]["namespace"]["pattern"].startswith("^[A-Za-z0-9]")


def test_the_official_a2a_client_reads_a_streamed_turn_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SSE events of SendStreamingMessage as the SDK parses them (the run itself scripted)."""
    import asyncio

    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, SendMessageRequest
    from google.protobuf.json_format import MessageToDict, ParseDict

    from deploy.dev import app as dev_app

    final = 'Bob Chen. [c2]\n\n**Sources**\n- Falcon, [c2.2]: "Bob Chen manages procurement."'
    seen: list[dict] = []

    async def scripted_turn(scope, headers, assistant, value, thread):  # type: ignore[no-untyped-def]
        seen.append(value)
        yield "started", ("thread-1", "run-1")
        yield "words", "Bob "
        yield "words", "Chen. [c2]"
        yield "done", {"messages": [{"type": "ai", "content": final}]}

    monkeypatch.setattr(a2a, "stream_turn", scripted_turn)

    async def converse() -> list[dict]:
        transport = httpx.ASGITransport(app=dev_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30) as http:
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url("http://127.0.0.1/a2a/chat")
            message = {"role": "ROLE_USER", "parts": [{"text": "Who buys?"}], "messageId": "m1"}
            request = SendMessageRequest(message=ParseDict(message, Message()))
            return [MessageToDict(e) async for e in client.send_message(request)]

    events = asyncio.run(converse())
    assert seen == [{"messages": [{"type": "human", "content": "Who buys?"}]}]
    assert [next(iter(e)) for e in events] == [
        "task",
        "statusUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    words = "".join(e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events if "artifactUpdate" in e)
    assert words == final and events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert events[0]["task"]["contextId"] == "thread-1" and events[-2]["artifactUpdate"]["lastChunk"]


def test_every_surface_says_how_to_name_a_collection() -> None:
    from pathlib import Path

    from a2a.client.card_resolver import parse_agent_card

    tools = {t.name: t for t in mcp.tools()}
    graphs = json.loads((Path(__file__).parents[2] / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    for name in ("ask", "summarize", "chat"):
        for text in (tools[name].description, graphs[name]["description"]):
            assert all(w in text for w in ("collection", "doc_ids", "folder path", "whole_namespace")), name
        assert "collection" in str(tools[name].title)
    assert "folder" in tools["ingest"].description and "superseded" in tools["ingest"].description
    assert "folder" in graphs["ingest"]["description"]
    assert "collection" in tools["documents"].description and "doc_ids" in mcp.THREAD_ID["description"]
    ingest = mcp.output_schema("ingest")
    assert {"documents", "superseded"} <= set(ingest["required"]) and "doc_id" not in ingest["required"]

    card = a2a.agent_card("http://127.0.0.1:8000/a2a/chat")
    assert "several" in card["description"] and "whole_namespace" in card["description"]
    parsed = parse_agent_card(card)  # the official SDK reads both skills
    (collection,) = [skill for skill in parsed.skills if "collections" in skill.tags]
    assert collection.name == "Chat about several documents" and len(collection.examples) >= 3
    said = " ".join(collection.examples) + collection.description
    assert all(w in said for w in ("doc_ids", '"path"', "whole_namespace"))
