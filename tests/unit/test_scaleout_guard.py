"""The tenant guard of the Aegra deployment, without servers: keys, run checks and the rewritten request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import uuid5

import pytest

from deploy import app as guard
from deploy import assistants
from deploy.auth import authenticate, keyring
from stores.deadlines import deadline_left
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
    assert assistants.workflow_of("ask") == "ask"
    assert assistants.workflow_of("chain") == "ask"  # the former id names the same workflow
    assert assistants.workflow_of("608f7b9c-04e5-5cf2-a3f7-ba75a3719808") == "ask"  # uuid5 of "chain" in Aegra's ns
    assert assistants.workflow_of(str(uuid5(assistants.ASSISTANT_NAMESPACE, "chat"))) == "chat"
    assert assistants.workflow_of("some-assistant") is None


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
        ({"assistant_id": "offload", "input": {"question": "?", "session": "t0123456789ab:their-thread"}}, 400),
        ({"assistant_id": "offload", "command": {"update": {"session": "t0123456789ab:their-thread"}}}, 400),
        ({"assistant_id": "offload", "command": {"update": {"bound": {"namespace": "team-a"}}}}, 400),
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


def _call(path: str, key: str | None, body: dict[str, Any] | bytes) -> tuple[int, dict[str, Any] | None]:
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

    payload = body if isinstance(body, bytes) else json.dumps(body).encode()

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


def test_a_threads_state_is_written_by_its_runs_only() -> None:
    """A state update would set the namespace or session a chat is bound to: refused; reading state is not."""
    bound = {"values": {"bound": {"namespace": "team-b", "session": "t0123456789ab:their-thread"}}}
    assert _call("/threads/t6/state", "key-a", bound) == (400, None)
    assert _call("/threads/t6/state", "key-a", {"values": None, "subgraphs": False})[0] == 200
    update = {"assistant_id": "offload", "command": {"update": {"question": "And the budget?"}}}
    assert _call("/threads/t6/runs/wait", "key-a", update)[0] == 200


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


def test_text_a_parser_chokes_on_is_a_short_400_on_mcp_and_a2a_too() -> None:
    """The app's own routes (/mcp, /a2a) and Aegra's, through the app as Aegra mounts it."""
    from fastapi.testclient import TestClient

    from tests.unit.test_security import MALFORMED

    call = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ingest", "arguments": {"text": %s}}}'
    )
    message = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": [{"text": %s}]}}}'
    run = b'{"assistant_id": "ingest", "input": {"text": %s}}'
    headers = {"content-type": "application/json", "x-api-key": "key-a", "accept": "application/json"}
    with TestClient(guard.app, raise_server_exceptions=False) as client:
        for case, value in MALFORMED.items():
            for path, template in (("/mcp", call), ("/a2a/offload", message), ("/threads/t1/runs/wait", run)):
                response = client.post(path, content=template % value, headers=headers)
                assert response.status_code == 400, (case, path, response.text)
                text = response.json()["message"]
                assert "\n" not in text and len(text) < 200 and "Error" not in text, (case, path, text)


def test_one_run_at_a_time_per_thread_refused_or_enqueued(monkeypatch: pytest.MonkeyPatch) -> None:
    """Aegra ignores multitask_strategy: the guard holds the thread for the run, so a second run is a 409, or
    with ``enqueue`` the next turn once the first has ended."""
    import threading

    order: list[str] = []
    waiting = threading.Event()
    acquire = guard.RunHold.acquire

    def noted(hold: guard.RunHold, wait: float = 0.0) -> bool:
        if wait:
            waiting.set()  # a run asks for the thread, ready to wait for it
        return acquire(hold, wait)

    monkeypatch.setattr(guard.RunHold, "acquire", noted)

    async def main() -> list[tuple[str, int]]:
        release = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            body = json.loads((await receive())["body"])
            order.append(f"start {body['input']['question']}")
            if body["input"]["question"] == "first":
                await release.wait()
            order.append(f"end {body['input']['question']}")
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def call(question: str, **extra: Any) -> tuple[str, int]:
            body = {"assistant_id": "offload", "input": {"question": question}, **extra}
            payload = json.dumps(body).encode()
            status: list[int] = []

            async def receive() -> Any:
                return {"type": "http.request", "body": payload, "more_body": False}

            async def send(message: Any) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])

            headers = [(b"content-type", b"application/json"), (b"x-api-key", b"key-a")]
            scope = {"type": "http", "method": "POST", "path": "/threads/t4/runs/wait", "headers": headers}
            await guard.TenantGuard(app)(scope, receive, send)
            return question, status[0]

        first = asyncio.create_task(call("first"))
        while not order:
            await asyncio.sleep(0.01)
        refused = await call("second")
        strange = await call("third", multitask_strategy="interrupt")
        queued = asyncio.create_task(call("fourth", multitask_strategy="enqueue"))
        assert await asyncio.to_thread(waiting.wait, 30)  # the fourth asks for the thread the first holds
        assert not queued.done()
        release.set()
        return [await first, refused, strange, await queued, await call("fifth")]

    answers = asyncio.run(main())
    assert answers == [("first", 200), ("second", 409), ("third", 400), ("fourth", 200), ("fifth", 200)]
    assert order == ["start first", "end first", "start fourth", "end fourth", "start fifth", "end fifth"]


@pytest.mark.parametrize(
    ("raised", "status"),
    [
        ("InputError", 400),
        ("TooLarge", 413),
        ("ModelError", 503),
        ("KeyError", 500),
        (None, 200),
    ],
)
def test_a_wait_whose_run_failed_answers_with_its_refusal(
    monkeypatch: pytest.MonkeyPatch, raised: str | None, status: int
) -> None:
    """Aegra answers a failed run's ``/runs/wait`` with 200 and ``{}`` and keeps the error's message alone in the run
    record: the guard answers with the status of the error the graph raised and its reason."""
    from stores import errors

    records: list[tuple[str, str, str | None]] = [("r0", "success", None)]  # an earlier run of the thread
    monkeypatch.setattr(guard, "run_records", lambda thread: list(records))
    reason = f"document 'f00d' is not ingested ({raised})"

    async def app(scope: Any, receive: Any, send: Any) -> None:  # Aegra: the graph runs in this process
        await receive()
        if raised is None:
            records.append(("r1", "success", None))
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b'{"answer": "Bob Chen"}'})
            return
        error = getattr(errors, raised, None) or KeyError
        message = str(error(reason))
        records.append(("r1", "error", message))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def call() -> tuple[int, bytes]:
        payload = json.dumps({"assistant_id": "offload", "input": {"question": "Who?"}}).encode()
        sent: list[Any] = []

        async def receive() -> Any:
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        headers = [(b"content-type", b"application/json"), (b"x-api-key", b"key-a")]
        scope = {"type": "http", "method": "POST", "path": "/threads/t5/runs/wait", "headers": headers}
        await guard.TenantGuard(app)(scope, receive, send)
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return sent[0]["status"], body

    answered, body = asyncio.run(call())
    assert answered == status, body
    if raised is None:
        assert json.loads(body) == {"answer": "Bob Chen"}
    elif status == 500:  # not one of ours: no detail for the caller, the log has it
        assert reason not in body.decode()
    else:
        assert json.loads(body)["message"] == reason


def test_settings_are_checked_and_bounded_before_a_run_is_created() -> None:
    """A refused setting never becomes a run (whose record would keep its input) nor a checkpoint."""
    files = IngestRoot(None)
    for context, input_ in (
        ({"max_chunks": -5}, {"question": "?", "text": "Otters."}),
        ({"worker_max_tokens": 10**9}, {"question": "?"}),
        ({"chunk_size": 2**70}, {"question": "?"}),
        ({}, {"question": "?" * 5000}),
    ):
        with pytest.raises(guard.Refused) as refused:
            guard.check_run({"assistant_id": "chain", "input": input_, "context": context}, "s1", TEAM_B, files)
        assert refused.value.status == 400, (context, str(refused.value))
    route = {"assistant_id": "route", "input": {"requests": ["plot sales"] * 60_000}}
    with pytest.raises(guard.Refused) as refused:
        guard.check_run(route, "s2", TEAM_B, files)
    assert refused.value.status == 400 and "at most 100" in str(refused.value)
    assert _call("/threads/s3/runs/wait", "key-a", {"assistant_id": "chain", "context": {"roots": 10**4}})[0] == 400


def test_every_input_check_runs_before_a_run_is_created_or_its_thread_claimed() -> None:
    """The same checks as LangServe's door: a refused input never becomes a run record, a checkpoint or an owner."""
    from surfaces.access import thread_key

    files = IngestRoot(None)
    for assistant, input_ in (
        ("chain", {"question": "   ", "text": "Otters."}),
        ("summarize", {"length": -3, "text": "Otters."}),
        ("chat", {"question": "   ", "text": "Otters."}),
        ("chat", {"messages": [5]}),
        ("route", {"request": " "}),
        ("chain", {"question": "Who?", "doc_ids": ["0123456789abcdef"] * 10_001}),
    ):
        with pytest.raises(guard.Refused) as refused:
            guard.check_run({"assistant_id": assistant, "input": input_}, "door", TEAM_B, files)
        assert refused.value.status == 400, (assistant, input_)
    assert guard._owners().owner(thread_key("team-b", "door")) is None
    resumed = guard.check_run(
        {"assistant_id": "chain", "input": {}, "command": {"resume": "go"}}, "door", TEAM_B, files
    )
    assert resumed["input"] == {}
