"""The guard ``langgraph dev`` runs before every route (``surfaces.studio``), without the server: origins, hosts,
operator settings and server files, on a stub app that records what reached it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from surfaces.studio import STUDIO_ORIGIN, StudioGuard

LOCAL = "127.0.0.1:2025"


def _call(
    method: str,
    path: str,
    body: Any = None,
    *,
    host: str = LOCAL,
    origin: str = "",
    root_path: str = "",
    extra: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One request through the guard: its status and the body the app behind it got (None when it got none)."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive() if method in ("POST", "PUT", "PATCH") else {"body": b""}
        seen["body"] = json.loads(message["body"]) if message["body"] else None
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    status: list[int] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())

    async def receive() -> Any:
        return {"type": "http.request", "body": payload, "more_body": False}

    headers = {"host": host, "content-type": "application/json", **(extra or {})}
    if origin:
        headers["origin"] = origin
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": root_path,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(StudioGuard(app)(scope, receive, send))
    return status[0], seen.get("body", "not reached")


RUN = {"assistant_id": "ingest", "input": {"text": "Herons wade."}}


def test_only_studio_and_the_local_command_line_reach_the_server() -> None:
    assert _call("POST", "/runs/wait", RUN)[0] == 200  # the SDK or curl: no Origin
    assert _call("POST", "/runs/wait", RUN, origin=STUDIO_ORIGIN)[0] == 200
    assert _call("POST", "/runs/wait", RUN, origin=f"http://{LOCAL}")[0] == 200  # the server's own /docs page
    for origin in ("https://evil.example", "http://localhost:3000", "null", "https://smith.langchain.com.evil.example"):
        assert _call("OPTIONS", "/runs/wait", origin=origin) == (403, "not reached"), origin
        assert _call("POST", "/runs/wait", RUN, origin=origin) == (403, "not reached"), origin
        plain = {"content-type": "text/plain"}  # a "simple" request a page sends without a preflight
        assert _call("POST", "/runs/wait", json.dumps(RUN).encode(), origin=origin, extra=plain)[0] == 403
    # A page whose name was made to point at 127.0.0.1 (DNS rebinding) sends its own name as the host.
    assert _call("GET", "/threads/search", host="evil.example:2025") == (403, "not reached")
    assert _call("POST", "/runs/wait", RUN, host="evil.example:2025")[0] == 403
    assert _call("GET", "/info", extra={"sec-fetch-site": "cross-site"})[0] == 403
    assert _call("GET", "/info", host="localhost:2025")[0] == 200


@pytest.mark.parametrize("key", ["base_url", "model", "worker_model", "temperature", "embedder", "llm_cache"])
def test_no_request_sets_the_model_endpoint_or_key(key: str) -> None:
    value: Any = "http://127.0.0.1:9/v1" if key == "base_url" else "x"
    for path, body in (
        ("/runs/wait", {**RUN, "context": {key: value}}),
        ("/threads/t1/runs/stream", {**RUN, "config": {"configurable": {key: value}}}),
        ("/runs/batch", [{**RUN, "context": {key: value}}]),
        ("/assistants", {"graph_id": "chain", "context": {key: value}}),
        ("/assistants/a1", {"config": {"configurable": {key: value}}}),
    ):
        status, reached = _call("POST" if path != "/assistants/a1" else "PATCH", path, body)
        assert (status, reached) == (400, "not reached"), (path, status)
    assert _call("POST", "/runs/wait", {**RUN, "context": {"chunk_size": 300, "namespace": "team"}})[0] == 200


def test_server_files_stay_inside_the_ingest_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "private.md"
    secret.write_text("# Private\n\nNot for callers.\n", encoding="utf-8")
    mcp_run = {"assistant_id": "ingest", "input": {"path": str(secret)}}
    # Without LONGDOC_INGEST_ROOT no file is read, whoever asks: the MCP and A2A tools' own loopback runs too.
    assert _call("POST", "/runs/wait", mcp_run)[0] == 400
    assert _call("POST", "/runs/wait", mcp_run, host="api", root_path="/noauth")[0] == 400
    root = tmp_path / "docs"
    root.mkdir()
    (root / "falcon.md").write_text("# Falcon\n\nPumps.\n", encoding="utf-8")
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    status, reached = _call("POST", "/runs/wait", {"assistant_id": "ingest", "input": {"path": "falcon.md"}})
    assert status == 200 and reached["input"]["path"] == str((root / "falcon.md").resolve())
    for path in (str(secret), "../private.md"):
        for where, body in (
            ("/runs/wait", {"assistant_id": "ingest", "input": {"path": path}}),
            ("/threads/t1/runs", {"assistant_id": "chain", "command": {"update": {"path": path}}}),
            ("/threads/t1/state", {"values": {"path": path}}),
            ("/threads", {"supersteps": [{"updates": [{"values": {"path": path}, "as_node": "__input__"}]}]}),
        ):
            status, reached = _call("POST", where, body)
            assert (status, reached) == (400, "not reached"), (where, path)
    session = {"assistant_id": "offload", "input": {"question": "?", "session": "someone-else"}}
    assert _call("POST", "/runs/wait", session)[0] == 400


def test_mcp_and_a2a_tool_calls_are_held_to_the_same_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "falcon.md").write_text("# Falcon\n\nPumps.\n", encoding="utf-8")
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(tmp_path))

    def tool(arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
        call = {"name": "ingest", "arguments": arguments, **params}
        return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}

    status, reached = _call("POST", "/mcp", tool({"path": "falcon.md"}))
    assert status == 200 and reached["params"]["arguments"]["path"] == str((tmp_path / "falcon.md").resolve())
    for body in (tool({"path": "/etc/passwd"}), tool({"text": "x"}, context={"base_url": "http://127.0.0.1:9/v1"})):
        status, reached = _call("POST", "/mcp", body)
        assert (status, reached) == (200, "not reached")  # answered here, as a tool error
    message = {"parts": [{"text": "What is it?"}, {"data": {"path": "../../etc/passwd"}}]}
    a2a = {"jsonrpc": "2.0", "id": 8, "method": "message/send", "params": {"message": message}}
    assert _call("POST", "/a2a/offload", a2a) == (200, "not reached")
    assert _call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})[0] == 200


def test_the_settings_a_caller_may_set_are_bounded() -> None:
    for context in ({"worker_max_tokens": 10**9}, {"chunk_size": 2**70}, {"k": 10**6}, {"max_chunks": -5}):
        assert _call("POST", "/runs/wait", {**RUN, "context": context}) == (400, "not reached"), context
