"""The tenant guard of the Aegra deployment, without servers: keys, run checks and the rewritten request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import uuid5

import pytest

from deploy import app as guard
from deploy.auth import authenticate, keyring
from stores.settings import deadline_left
from surfaces.access import IngestRoot, Tenant

KEYS = {"team-a": "key-a", "team-b": {"key": "key-b", "namespaces": ["team-b", "team-b-old"]}}
TEAM_B = Tenant("team-b", ("team-b", "team-b-old"))


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps(KEYS))
    keyring.cache_clear()
    guard._owners.cache_clear()
    yield
    keyring.cache_clear()
    guard._owners.cache_clear()


def test_built_in_assistants_are_known_by_graph_name_and_by_aegra_id() -> None:
    assert guard.workflow_of("ask") == "ask"
    assert guard.workflow_of("chain") == "ask"  # the former id names the same workflow
    assert guard.workflow_of("608f7b9c-04e5-5cf2-a3f7-ba75a3719808") == "ask"  # uuid5 of "chain" in Aegra's namespace
    assert guard.workflow_of(str(uuid5(guard.ASSISTANT_NAMESPACE, "chat"))) == "chat"
    assert guard.workflow_of("some-assistant") is None


def test_a_run_gets_the_tenants_namespace_and_only_served_settings() -> None:
    files = IngestRoot(None)
    body = {"assistant_id": "chain", "input": {"question": "?"}, "config": {"configurable": {"read_all": True}}}
    checked = guard.check_run(body, "t1", TEAM_B, files)
    assert checked["context"] == {"read_all": True, "namespace": "team-b"} and checked["config"] == {}
    old = guard.check_run({"assistant_id": "ingest", "context": {"namespace": "team-b-old"}}, "t2", TEAM_B, files)
    assert old["context"]["namespace"] == "team-b-old"
    refusals = [
        ({"assistant_id": "mine"}, 403),
        ({"assistant_id": "chain", "context": {"base_url": "http://127.0.0.1:9"}}, 400),
        ({"assistant_id": "chain", "context": {"namespace": "team-a"}}, 403),
        ({"assistant_id": "ingest", "input": {"text": "x", "namespace": "team-a"}}, 403),
        ({"assistant_id": "ingest", "input": {"path": "/etc/passwd"}}, 400),
        ({"assistant_id": "chain", "checkpoint": {"thread_id": "someone-elses"}}, 400),
        ({"assistant_id": "chain", "config": {"callbacks": []}}, 400),
        ({"assistant_id": "chain", "command": {"update": {"namespace": "team-a"}}}, 403),
        ({"assistant_id": "chain", "command": {"goto": {"node": "manager", "input": {}}}}, 400),
    ]
    for request, status in refusals:
        with pytest.raises(guard.Refused) as refused:
            guard.check_run(request, "t3", TEAM_B, files)
        assert refused.value.status == status, request


def test_file_names_resolve_inside_the_ingest_root_only(tmp_path: Path) -> None:
    (tmp_path / "doc.md").write_text("# Doc\n\nText.\n", encoding="utf-8")
    files = IngestRoot(tmp_path)
    checked = guard.check_run({"assistant_id": "ingest", "input": {"path": "doc.md"}}, "f1", TEAM_B, files)
    assert checked["input"]["path"] == str((tmp_path / "doc.md").resolve())
    with pytest.raises(guard.Refused) as refused:
        guard.check_run({"assistant_id": "ingest", "input": {"path": "../../etc/passwd"}}, "f2", TEAM_B, files)
    assert refused.value.status == 400 and str(tmp_path) not in str(refused.value)


def test_a_thread_stays_with_its_first_tenant_and_namespace() -> None:
    files = IngestRoot(None)
    guard.check_run({"assistant_id": "chain"}, "shared", TEAM_B, files)
    with pytest.raises(guard.Refused) as refused:
        guard.check_run({"assistant_id": "chain", "context": {"namespace": "team-b-old"}}, "shared", TEAM_B, files)
    assert refused.value.status == 403


def test_another_tenants_thread_is_answered_as_one_that_does_not_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Aegra's thread table (here a dict): a foreign id and an unknown one get the same 404."""
    table = {"b-thread": "team-b"}
    monkeypatch.setattr(guard, "_aegra_owner", lambda thread_id: table.get(thread_id, ""))
    files = IngestRoot(None)
    team_a = Tenant("team-a", ("team-a",))
    answers = []
    for thread in ("b-thread", "nobodys-thread"):
        with pytest.raises(guard.Refused) as refused:
            guard.check_run({"assistant_id": "chain", "input": {"question": "?"}}, thread, team_a, files)
        answers.append((refused.value.status, str(refused.value).replace(thread, "ID")))
    assert answers[0] == answers[1] and answers[0][0] == 404
    assert guard.check_run({"assistant_id": "chain"}, "b-thread", TEAM_B, files)["context"]["namespace"] == "team-b"
    # Thread ids are the server's to choose: one answer whoever holds the id.
    assert _call("/threads", "key-a", {"thread_id": "b-thread"})[0] == 400
    assert _call("/threads", "key-a", {"thread_id": "free-id"})[0] == 400
    assert _call("/threads", "key-a", {"metadata": {}})[0] == 200


def test_the_auth_handler_names_the_tenant_of_a_key() -> None:
    user = asyncio.run(authenticate({"Authorization": "Bearer key-b"}))
    assert user["identity"] == "team-b"
    from langgraph_sdk import Auth

    with pytest.raises(Auth.exceptions.HTTPException):
        asyncio.run(authenticate({"X-API-Key": "key-c"}))


def _call(path: str, key: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """Send one request through the guard; the status, and the body the app behind it received."""
    seen: dict[str, Any] = {}

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen["body"] = json.loads(message["body"])
        seen["length"] = dict(scope["headers"])[b"content-length"]
        seen["deadline"] = deadline_left()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    status: list[int] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    payload = json.dumps(body).encode()

    async def receive() -> Any:
        return {"type": "http.request", "body": payload, "more_body": False}

    headers = [(b"content-length", str(len(payload)).encode()), (b"content-type", b"application/json")]
    if key:
        headers.append((b"x-api-key", key.encode()))
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    asyncio.run(guard.TenantGuard(inner)(scope, receive, send))
    return status[0], seen or None


def test_the_guard_refuses_missing_keys_and_rewrites_run_requests() -> None:
    assert _call("/threads/search", None, {}) == (401, None)
    assert _call("/info", "wrong", {}) == (401, None)
    assert _call("/threads/search", "key-a", {"limit": 5})[0] == 200
    status, seen = _call("/threads/t9/runs/wait", "key-a", {"assistant_id": "ingest", "input": {"text": "x"}})
    assert status == 200 and seen is not None
    assert seen["body"]["context"] == {"namespace": "team-a"}
    assert int(seen["length"]) == len(json.dumps(seen["body"]).encode())
    foreign_namespace = {"assistant_id": "ingest", "context": {"namespace": "team-a"}}
    assert _call("/threads/t9/runs/stream", "key-b", foreign_namespace)[0] == 403


def test_the_guard_refuses_bodies_that_are_not_plain_json() -> None:
    nested = {"assistant_id": "ingest", "input": {"text": "x", "title": [[[[[[[[]]]]]]]]}}
    assert _call("/threads/t5/runs/wait", "key-a", nested)[0] == 200
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    assert _call("/threads/t5/runs/wait", "key-a", {"assistant_id": "ingest", "input": {"title": deep}})[0] == 400
    nan = {"assistant_id": "chain", "context": {"jump_penalty": float("nan")}}
    assert _call("/threads/t5/runs/wait", "key-a", nan)[0] == 400


def test_a_500_never_shows_its_details() -> None:
    sent: list[Any] = []

    async def failing(scope: Any, receive: Any, send: Any) -> None:
        detail = b'{"detail": "duplicate key value violates unique constraint: INSERT INTO thread (thread_id) ..."}'
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-length", b"90")]})
        await send({"type": "http.response.body", "body": detail})

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    headers = [(b"x-api-key", b"key-a"), (b"content-type", b"application/json")]
    scope = {"type": "http", "method": "POST", "path": "/threads", "headers": headers}
    asyncio.run(guard.TenantGuard(failing)(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert sent[0]["status"] == 500 and b"INSERT" not in body and b"thread_id" not in body
    assert json.loads(body)["error"] == "internal_error"
    plain = {"type": "http", "method": "POST", "path": "/threads", "headers": [(b"x-api-key", b"key-a")]}
    sent.clear()
    asyncio.run(guard.TenantGuard(failing)(plain, receive, send))
    assert sent[0]["status"] == 415


def test_runs_get_the_run_deadline_and_large_bodies_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_RUN_TIMEOUT", "120")
    status, seen = _call("/threads/t7/runs", "key-a", {"assistant_id": "chain", "input": {"question": "?"}})
    assert status == 200 and seen is not None and 100 < seen["deadline"] <= 120
    monkeypatch.setenv("LONGDOC_MAX_REQUEST_BYTES", "1000")
    assert _call("/threads/t8/runs/wait", "key-a", {"assistant_id": "ingest", "input": {"text": "x" * 2000}})[0] == 413
    assert _call("/threads/t8/state", "key-a", {"values": {"x": "y" * 2000}})[0] == 413


def test_a_dead_run_is_resumed_by_the_same_input_and_started_over_by_another(sample_markdown: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from graphs.chain.graph import builder
    from nodes.ingest import ingest
    from stores.models import ModelError, use_chat_model
    from tests.unit.test_resume import Failing

    doc_id = ingest(str(sample_markdown), chunk_size=50, chunk_overlap=0).doc_id
    saver = InMemorySaver()
    graph = builder.compile(checkpointer=saver)
    question = {"question": "What budget was approved?", "doc_id": doc_id}
    body = {"assistant_id": "chain", "input": question, "context": {"namespace": "default"}}
    model = Failing(default='{"quotes": [], "missing": "the budget"}', fail_at="Evidence so far:", down=2)
    with use_chat_model(model), pytest.raises(ModelError):
        graph.invoke(question, {"configurable": {"thread_id": "dead"}}, context={"read_all": True})
    assert graph.get_state({"configurable": {"thread_id": "dead"}}).next  # stopped half-way

    resumed = guard.continue_dead_run("chain", "dead", body, saver)
    assert resumed["command"] == {"update": question} and "input" not in resumed  # Aegra takes one of the two
    other = {**body, "input": {**question, "question": "Who leads the team?"}}
    assert guard.continue_dead_run("chain", "dead", other, saver) == other  # a first run starts over
    assert not graph.get_state({"configurable": {"thread_id": "dead"}}).next
    assert guard.continue_dead_run("chain", "fresh", body, saver) == body  # nothing to continue

    second = {"configurable": {"thread_id": "second"}}
    manager = json.dumps({"answer": "40,000 euros", "evidence": ["c1"], "explanation": "Approved [c1]."})
    worker = '{"quotes": [], "missing": "the budget"}'
    with use_chat_model(Failing(rules=[("manager of a chain", manager)], default=worker)):
        graph.invoke(question, second, context={"read_all": True})
    model.down = 2
    with use_chat_model(model), pytest.raises(ModelError):
        graph.invoke({**question, "question": "Who leads?"}, second, context={"read_all": True})
    forked = guard.continue_dead_run("chain", "second", {**body, "input": {**question, "question": "When?"}}, saver)
    start = next(s for s in graph.get_state_history(second) if s.metadata.get("source") == "input")
    assert forked["checkpoint"] == {"checkpoint_id": start.parent_config["configurable"]["checkpoint_id"]}
    assert guard.continue_dead_run("chain", "dead", {**body, "command": {"resume": 1}}, saver)["command"] == {
        "resume": 1
    }
