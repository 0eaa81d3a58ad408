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
    extra: dict[str, str | None] | None = None,
    server: tuple[str, int] | None = None,
    client: tuple[str, int] | None = ("127.0.0.1", 50000),
    answered: dict[str, Any] | None = None,
) -> tuple[int, Any]:
    """One request through the guard: its status and the body the app behind it got (None when it got none).

    ``server``: the address the request reached (ASGI ``server``); ``client``: the peer of its connection (ASGI
    ``client``; loopback unless given); ``answered`` gets the response's headers and the request headers the app saw.
    """
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive() if method in ("POST", "PUT", "PATCH") else {"body": b""}
        seen["body"] = json.loads(message["body"]) if message["body"] else None
        seen["headers"] = {k.decode(): v.decode() for k, v in scope["headers"]}
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    status: list[int] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
            if answered is not None:
                answered["response"] = {k.decode().lower(): v.decode() for k, v in message["headers"]}

    payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())

    async def receive() -> Any:
        return {"type": "http.request", "body": payload, "more_body": False}

    headers = {"host": host, "content-type": "application/json", **(extra or {})}
    headers = {k: v for k, v in headers.items() if v is not None}
    if origin:
        headers["origin"] = origin
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": root_path,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        **({"server": server} if server else {}),
        **({"client": client} if client else {}),
    }
    asyncio.run(StudioGuard(app)(scope, receive, send))
    if answered is not None:
        answered["request"] = seen.get("headers")
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


UI = "http://localhost:3000"
"""Where Agent Chat UI runs (``pnpm dev``)."""


def test_pages_of_this_machine_reach_a_server_listening_on_loopback() -> None:
    here = ("127.0.0.1", 2025)
    preflight = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
    for origin in (UI, "http://127.0.0.1:3000", "http://[::1]:5173", "https://localhost"):
        answered: dict[str, Any] = {}
        assert _call("POST", "/threads/t1/runs/stream", RUN, origin=origin, server=here, answered=answered)[0] == 200
        assert answered["response"]["access-control-allow-origin"] == origin
        assert "x-pagination-total" in answered["response"]["access-control-expose-headers"]
        answered = {}
        status, reached = _call(
            "OPTIONS", "/threads/search", origin=origin, server=here, extra=preflight, answered=answered
        )
        assert (status, reached) == (200, "not reached"), origin  # answered by CORS, before the server
        assert answered["response"]["access-control-allow-origin"] == origin
    # localhost:3000 calling 127.0.0.1:2025 is a cross-site fetch, and allowed as such.
    assert _call("GET", "/info", origin=UI, server=here, extra={"sec-fetch-site": "cross-site"})[0] == 200
    assert _call("GET", "/info", origin=UI, server=("::1", 2025))[0] == 200
    assert _call("GET", "/info", origin=UI, server=("::ffff:127.0.0.1", 2025))[0] == 200


def test_foreign_pages_stay_refused_whatever_the_server_listens_on() -> None:
    here = ("127.0.0.1", 2025)
    for origin in (
        "https://evil.example",
        "http://localhost.evil.example:3000",
        "http://127.0.0.1.evil.example",
        "http://user@localhost:3000",
        "null",
        "file://",
        "http://localhost:3000/path",
    ):
        assert _call("POST", "/runs/wait", RUN, origin=origin, server=here) == (403, "not reached"), origin
        assert _call("OPTIONS", "/runs/wait", origin=origin, server=here) == (403, "not reached"), origin
    # A rebound name is refused whatever its origin; a request that reached the server from the network
    # (it listens on 0.0.0.0) gets no loopback pass.
    assert _call("POST", "/runs/wait", RUN, origin=UI, server=here, host="evil.example:2025")[0] == 403
    assert _call("POST", "/runs/wait", RUN, origin=UI, server=("192.168.1.7", 2025))[0] == 403
    assert _call("POST", "/runs/wait", RUN, origin=UI, server=("0.0.0.0", 2025))[0] == 403


def test_a_peer_on_the_network_is_refused_whatever_host_it_names() -> None:
    """The peer address of the connection says where a request comes from: ``Host: localhost`` from another
    machine (the server listening on 0.0.0.0) is refused before any work, CORS preflights and MCP calls included."""
    away = ("203.0.113.7", 41000)  # an address of the network, never connected to: the ASGI scope names it
    everywhere = ("0.0.0.0", 2025)
    for host in ("localhost:2025", "127.0.0.1:2025", "[::1]:2025"):
        assert _call("POST", "/runs/wait", RUN, host=host, client=away, server=everywhere) == (403, "not reached")
        assert _call("GET", "/threads/search", host=host, client=away) == (403, "not reached")
        assert _call("POST", "/runs/wait", RUN, host=host, client=("127.0.0.1", 41000), server=everywhere)[0] == 200
    assert _call("POST", "/runs/wait", RUN, client=("::ffff:203.0.113.7", 41000)) == (403, "not reached")
    assert _call("OPTIONS", "/runs/wait", origin=STUDIO_ORIGIN, client=away) == (403, "not reached")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask", "arguments": {}}}
    assert _call("POST", "/mcp", call, client=away) == (403, "not reached")
    assert _call("POST", "/runs/wait", RUN, client=None, server=("127.0.0.1", 2025)) == (403, "not reached")
    assert _call("POST", "/runs/wait", RUN, client=None)[0] == 200  # a unix socket: no address on either side
    assert _call("POST", "/runs/wait", RUN, client=("::1", 41000))[0] == 200
    assert _call("POST", "/runs/wait", RUN, client=("::ffff:127.0.0.1", 41000))[0] == 200


def test_the_operator_can_name_the_peers_of_other_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.errors import InputError

    monkeypatch.setenv("LONGDOC_DEV_CLIENTS", "172.17.0.1, 192.168.1.0/24")  # a container's host, a network
    assert _call("POST", "/runs/wait", RUN, client=("172.17.0.1", 41000))[0] == 200
    assert _call("POST", "/runs/wait", RUN, client=("192.168.1.30", 41000))[0] == 200
    assert _call("POST", "/runs/wait", RUN, client=("192.168.2.30", 41000)) == (403, "not reached")
    # a named peer still names this machine as its host (a rebound name stays refused)
    assert _call("POST", "/runs/wait", RUN, client=("172.17.0.1", 41000), host="evil.example:2025")[0] == 403
    monkeypatch.setenv("LONGDOC_DEV_CLIENTS", "172.17.0.300")
    with pytest.raises(InputError, match="LONGDOC_DEV_CLIENTS"):
        _call("POST", "/runs/wait", RUN, client=("172.17.0.1", 41000))


def test_the_origins_of_this_machine_can_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_DEV_ORIGINS", "http://localhost:3000, http://devbox.lan:3000/")
    away = ("10.0.0.2", 2025)  # in a container, say: the request reaches the server on another address
    assert _call("POST", "/runs/wait", RUN, origin=UI, server=away)[0] == 200
    assert _call("POST", "/runs/wait", RUN, origin="http://devbox.lan:3000", server=away)[0] == 200
    assert _call("POST", "/runs/wait", RUN, origin="http://localhost:5173", server=("127.0.0.1", 2025))[0] == 403
    assert _call("POST", "/runs/wait", RUN, origin="https://evil.example", server=away)[0] == 403


def test_a_json_body_sent_without_a_json_type_is_taken_as_json() -> None:
    untyped = {"content-type": None}
    answered: dict[str, Any] = {}
    status, reached = _call("POST", "/threads/t1/runs/stream", RUN, extra=untyped, answered=answered)
    assert (status, reached) == (200, RUN)
    assert answered["request"]["content-type"] == "application/json"
    assert _call("POST", "/threads", b"", extra=untyped)[0] == 200  # an empty body, as a new thread's
    # The same checks as a typed body: operator settings, depth; and what is not JSON is still refused.
    assert _call("POST", "/runs/wait", {**RUN, "context": {"model": "x"}}, extra=untyped) == (400, "not reached")
    assert _call("POST", "/runs/wait", b"[" * 100 + b"]" * 100, extra=untyped)[0] == 400
    assert _call("POST", "/runs/wait", b"assistant_id=ingest", extra=untyped) == (415, "not reached")
    # fetch labels a string body text/plain: the UI's proxy forwards every body so.
    plain = {"content-type": "text/plain;charset=UTF-8"}
    answered = {}
    assert _call("POST", "/runs/wait", json.dumps(RUN).encode(), extra=plain, answered=answered) == (200, RUN)
    assert answered["request"]["content-type"] == "application/json"
    assert _call("POST", "/runs/wait", b"not json", extra=plain) == (415, "not reached")
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert _call("POST", "/runs/wait", json.dumps(RUN).encode(), extra=form) == (415, "not reached")
    # A foreign page's untyped body is refused for its origin first.
    assert _call("POST", "/runs/wait", RUN, origin="https://evil.example", extra=untyped)[0] == 403


def test_a_chat_thread_is_titled_by_its_first_question() -> None:
    titled: list[tuple[str, str]] = []

    async def titles(thread_id: str, title: str) -> None:
        titled.append((thread_id, title))

    def run(path: str, body: Any) -> int:
        seen: list[int] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            seen.append(200)

        async def receive() -> Any:
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}

        async def send(message: Any) -> None:
            return None

        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "root_path": "",
            "headers": [(b"host", LOCAL.encode()), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 50000),
        }
        asyncio.run(StudioGuard(app, titles=titles)(scope, receive, send))
        return len(seen)

    upload = {"type": "file", "source_type": "base64", "data": "eA==", "metadata": {"filename": "falcon.md"}}
    words = [{"type": "text", "text": "  Who manages\nprocurement? "}, upload]
    assert run(
        "/threads/t1/runs/stream",
        {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": words}]}},
    )
    assert run(
        "/threads/t2/runs/wait",
        {"assistant_id": "chat", "input": {"messages": [{"role": "user", "content": [upload]}]}},
    )
    long = "why " * 40
    assert run(
        "/threads/t3/runs", {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": long}]}}
    )
    # Not a chat message on a thread: no title.
    assert run("/runs/wait", {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": "Hi"}]}})
    assert run("/threads/t4/runs/wait", {"assistant_id": "ask", "input": {"question": "Who?"}})
    assert titled[:2] == [("t1", "Who manages procurement?"), ("t2", "falcon.md")]
    assert titled[2][0] == "t3" and len(titled[2][1]) <= 80 and titled[2][1].endswith("why…")
    assert len(titled) == 3

    async def broken(thread_id: str, title: str) -> None:
        raise RuntimeError("no such thread")

    # The run goes on when titling fails.
    body = {"assistant_id": "chat", "input": {"messages": [{"type": "human", "content": "Hi"}]}}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    statuses: list[int] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def receive() -> Any:
        return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/threads/t5/runs/stream",
        "root_path": "",
        "headers": [(b"host", LOCAL.encode()), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
    }
    asyncio.run(StudioGuard(app, titles=broken)(scope, receive, send))
    assert statuses == [200]


@pytest.mark.parametrize("raw", [b'{"a": }', b'{"a": 01}', b'{"a": "\x00"}', b'{"a": 1'])
@pytest.mark.parametrize("path", ["/runs/wait", "/threads", "/assistants", "/assistants/search", "/mcp", "/a2a/chat"])
def test_a_body_that_is_not_json_is_a_400_with_the_reason_on_every_route(raw: bytes, path: str) -> None:
    assert _call("POST", path, raw) == (400, "not reached")
    assert _refusal("POST", path, raw).startswith("the request body is not JSON: ")


def test_an_assistant_is_refused_a_setting_its_workflow_does_not_read() -> None:
    for method, path, body in (
        ("POST", "/assistants", {"graph_id": "chat", "context": {"chunksize": 300}}),
        ("POST", "/assistants", {"graph_id": "offload", "config": {"configurable": {"keep_turn": 2}}}),
        ("PATCH", "/assistants/a1", {"graph_id": "ask", "context": {"keep_turns": 2}}),  # chat's, not ask's
        ("PATCH", "/assistants/a1", {"context": {"no_such_setting": 1}}),
        ("POST", "/assistants", {"graph_id": "chat", "config": {"recursion_limt": 5}}),
    ):
        assert _call(method, path, body) == (400, "not reached"), body
    reasons = _refusal("POST", "/assistants", {"graph_id": "chat", "context": {"chunksize": 300, "bogus": 1}})
    assert "chat does not take context keys 'bogus', 'chunksize'" in reasons
    for method, path, body in (
        ("POST", "/assistants", {"graph_id": "chat", "context": {"keep_turns": 2, "chunk_size": 300}}),
        ("POST", "/assistants", {"graph_id": "ask", "config": {"configurable": {"budget": 900}, "tags": ["x"]}}),
        ("PATCH", "/assistants/a1", {"context": {"keep_turns": 2}}),  # some workflow reads it
        ("POST", "/assistants/search", {"graph_id": "chat", "limit": 5}),
    ):
        assert _call(method, path, body)[0] == 200, body


def test_a_chat_message_attaching_too_many_documents_is_a_413(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_ATTACHMENTS", "1")
    block = {"type": "text-plain", "text": "Herons wade.", "mime_type": "text/plain"}
    message = {"type": "human", "content": [{"type": "text", "text": "Where?"}, block, block]}
    run = {"assistant_id": "chat", "input": {"messages": [message]}}
    assert _call("POST", "/threads/t1/runs/stream", run) == (413, "not reached")
    assert "LONGDOC_MAX_ATTACHMENTS" in _refusal("POST", "/runs/wait", run)
    message["content"] = message["content"][:2]
    assert _call("POST", "/threads/t1/runs/stream", run)[0] == 200


def _refusal(method: str, path: str, body: Any) -> str:
    """The reason the guard answers a request it refuses with."""
    said: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("refused requests reach no route")

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            said.append(message["body"])

    async def receive() -> Any:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        return {"type": "http.request", "body": payload, "more_body": False}

    headers = [(b"host", LOCAL.encode()), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": headers}
    scope["client"] = ("127.0.0.1", 50000)
    asyncio.run(StudioGuard(app)(scope, receive, send))
    return str(json.loads(b"".join(said))["detail"])
