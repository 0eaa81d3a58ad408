"""The scale-out deployment's MCP and A2A routes: what they take from a request (no servers started)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from deploy import a2a, mcp
from deploy.app import app
from deploy.auth import keyring


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps({"team-a": "key-a"}))
    keyring.cache_clear()
    with TestClient(app) as served:
        yield served
    keyring.cache_clear()


def test_the_routes_are_served_behind_the_guard(keyed: TestClient) -> None:
    card = "/a2a/offload/.well-known/agent-card.json"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert keyed.get(card).status_code == 401 and keyed.post("/mcp", json=initialize).status_code == 401
    assert keyed.post("/a2a/offload", json={}).status_code == 401
    key = {"X-API-Key": "key-a"}
    assert keyed.get(card, headers=key).json()["supportedInterfaces"][0]["url"] == "/a2a/offload"
    assert keyed.get("/a2a/chain/.well-known/agent-card.json", headers=key).status_code == 404
    refused = keyed.post("/a2a/chain", json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage"}, headers=key)
    assert refused.json()["error"]["code"] == -32602 and refused.json()["id"] == 7
    wrong = keyed.post("/a2a/offload", json={"jsonrpc": "2.0", "id": 8, "method": "GetTask"}, headers=key)
    assert wrong.json()["error"]["code"] == -32601
    accept = {**key, "Accept": "application/json, text/event-stream"}
    tools = keyed.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=accept).json()
    assert [t["name"] for t in tools["result"]["tools"]] == list(mcp.DESCRIPTIONS)


def test_tool_schemas_are_the_graph_inputs_without_the_transcript() -> None:
    for name in mcp.DESCRIPTIONS:
        schema = mcp.input_schema(name)
        assert schema["type"] == "object" and "messages" not in schema.get("properties", {})
        text = json.dumps(schema)
        assert "$defs" not in schema or "$ref" in text
    assert {"doc_id", "question"} <= set(mcp.input_schema("chain")["properties"])
    assert {"doc_id", "question", "goal"} <= set(mcp.input_schema("offload")["properties"])


def test_tool_calls_go_to_the_socket_the_request_came_in_on() -> None:
    scope = {"server": ("127.0.0.1", 8123), "headers": [(b"host", b"attacker.example:80")]}
    assert mcp.own_url(scope) == "http://127.0.0.1:8123"
    assert mcp.own_url({"server": ("0.0.0.0", 9000)}) == "http://127.0.0.1:9000"


def test_an_a2a_message_becomes_a_turn() -> None:
    value = a2a.turn_input([{"text": "Who buys?"}, {"data": {"doc_id": "0123456789abcdef"}}, {"text": "Briefly."}])
    assert value == {"doc_id": "0123456789abcdef", "messages": [{"type": "human", "content": "Who buys?\nBriefly."}]}
    for parts, message in (
        ([{"data": {"doc_id": "x"}}], "no text part"),
        ([{"file": {"uri": "file:///etc/passwd"}}], "exactly one of text or data"),
        ([{"text": "a", "data": {}}], "exactly one of text or data"),
        ([{"text": "a"}, {"data": [1]}], "JSON object"),
    ):
        with pytest.raises(ValueError, match=message):
            a2a.turn_input(parts)
