"""Runs of ``langgraph dev`` bounded in model calls, and runs whose client leaves stopped: the dev server's run
requests, and the MCP and A2A routes of both servers (``surfaces.dev_runs``, ``surfaces.disconnect``), at the ASGI
level with scripted models; the servers themselves are in ``tests/integration/test_bench_leave.py``."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from doubles.chat import ScriptedChatModel
from stores.models import LLM, messages, use_chat_model
from stores.usage import CallsSpent, RunStopped, calls_left
from surfaces.disconnect import LEFT


def _served_summary(doc_id: str, run_id: str, model: ScriptedChatModel) -> BaseException | None:
    """A summary run as ``langgraph dev`` runs it: inside the factory ``langgraph.json`` names, on a task of its own
    (not the request's), its steps on worker threads. What it raised (None when it finished)."""
    from deploy import dev_graphs

    async def run() -> None:
        async with dev_graphs.summarize({"configurable": {"run_id": run_id}}) as graph:
            await graph.ainvoke({"doc_id": doc_id, "length": 40}, context={"chunk_size": 120})

    async def worker() -> BaseException | None:
        try:
            await asyncio.create_task(run())
        except (CallsSpent, RunStopped) as exc:  # the run's error, as the server records it
            return exc
        return None

    with use_chat_model(model):
        return asyncio.run(worker())


def test_a_dev_server_run_makes_no_more_model_calls_than_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doubles.replies import summarize_chat_model
    from tests.unit.test_request_bounds import _namespace_of_documents

    doc_id = _namespace_of_documents(tmp_path / "docs", 2)[0]
    monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "4")
    model = summarize_chat_model()
    raised = _served_summary(doc_id, "run-bounded", model)
    assert isinstance(raised, CallsSpent) and "bound of 4 model calls" in str(raised), raised
    assert len(model.calls) == 4
    assert calls_left() == 4  # the budget was the run's: none is left open after it


def test_a_dev_server_run_stopped_before_it_starts_makes_no_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doubles.replies import summarize_chat_model
    from surfaces.dev_runs import stop_run
    from tests.unit.test_request_bounds import _namespace_of_documents

    doc_id = _namespace_of_documents(tmp_path / "docs", 1)[0]
    stop_run("run-gone")  # its client left while the run was queued
    model = summarize_chat_model()
    raised = _served_summary(doc_id, "run-gone", model)
    assert isinstance(raised, RunStopped) and str(raised) == LEFT and model.calls == []
    assert _served_summary(doc_id, "run-other", summarize_chat_model()) is None  # another run goes on


def _watched(path: str, body: dict[str, Any], leave_at: int, calls: int = 6) -> tuple[int, list[str]]:
    """A run request through :class:`surfaces.dev_runs.RunWatch` to an app that answers as langgraph-api does (the
    run's id in ``Content-Location``, the run on a task and threads of its own, inside its factory's budget); the
    client leaves after model call ``leave_at``. The calls made and how the run ended."""
    import uuid

    from deploy.dev_graphs import bounded
    from surfaces.dev_runs import RunWatch

    model = ScriptedChatModel(default="A reply.")
    outcome: list[str] = []
    noticed = threading.Event()
    run_id = str(uuid.uuid4())

    async def main() -> None:
        loop, gone = asyncio.get_running_loop(), asyncio.Event()

        def steps() -> None:
            try:
                for _ in range(calls):
                    LLM("worker", cache=False).text(messages("s", "u"))
                    if len(model.calls) == leave_at:
                        loop.call_soon_threadsafe(gone.set)
                        noticed.wait(5)
                outcome.append("finished")
            except RunStopped as exc:
                outcome.append(f"stopped: {exc}")

        async def run() -> None:  # the worker task: the factory's budget, steps on a thread
            async with bounded(object(), {"configurable": {"run_id": run_id}}):
                await asyncio.to_thread(steps)

        async def server(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            worker = loop.create_task(run())
            location = f"/threads/t1/runs/{run_id}".encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-location", location)]})
            await asyncio.gather(worker, return_exceptions=True)
            await send({"type": "http.response.body", "body": b"{}"})

        first = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

        async def receive() -> Any:
            if first:
                return first.pop()
            await gone.wait()
            loop.call_soon(noticed.set)  # after the watcher has handled the disconnect
            return {"type": "http.disconnect"}

        async def send(_message: Any) -> None:
            return None

        scope = {"type": "http", "method": "POST", "path": path, "headers": []}
        await RunWatch(server)(scope, receive, send)

    with use_chat_model(model):
        asyncio.run(main())
    return len(model.calls), outcome


def test_a_dev_server_run_whose_client_leaves_starts_no_more_model_calls_unless_it_may_go_on() -> None:
    stopped = [f"stopped: {LEFT}"]
    assert _watched("/threads/t1/runs/wait", {"assistant_id": "ask"}, leave_at=2) == (2, stopped)
    assert _watched("/runs/wait", {"assistant_id": "ask"}, leave_at=3) == (3, stopped)
    assert _watched("/threads/t1/runs/stream", {"assistant_id": "ask"}, leave_at=2) == (2, stopped)
    assert _watched("/runs/stream", {"on_disconnect": "cancel"}, leave_at=2) == (2, stopped)
    assert _watched("/threads/t1/runs/stream", {"on_disconnect": "continue"}, leave_at=2) == (6, ["finished"])
    assert _watched("/threads/t1/runs", {"assistant_id": "ask"}, leave_at=2) == (6, ["finished"])  # background


def test_the_run_a_response_answers_for_is_named_by_its_content_location() -> None:
    from surfaces.dev_runs import created_run

    def start(location: bytes) -> dict[str, Any]:
        return {"type": "http.response.start", "headers": [(b"Content-Location", location)]}

    assert created_run(start(b"/threads/t1/runs/1f0-ab")) == "1f0-ab"
    assert created_run(start(b"/runs/1f0-cd/")) == "1f0-cd"
    assert created_run(start(b"/threads/t1")) == ""
    assert created_run({"type": "http.response.start", "headers": []}) == ""


def _caller(path: str, leaves: bool) -> tuple[list[str], list[int]]:
    """A POST to ``path`` through :class:`surfaces.disconnect.CallerWatch` whose app makes a loopback request (a
    long wait, as a run's answer) through :func:`surfaces.disconnect.while_caller_stays`, answering on a task of its
    own as the MCP SDK does; the caller leaves once the wait began when ``leaves``. What happened to the loopback
    request, and the statuses sent."""
    from surfaces.disconnect import CallerWatch, while_caller_stays

    happened: list[str] = []
    statuses: list[int] = []

    async def main() -> None:
        began, gone = asyncio.Event(), asyncio.Event()

        async def loopback() -> str:
            began.set()
            try:
                await (asyncio.Event().wait() if leaves else asyncio.sleep(0))
            except asyncio.CancelledError:
                happened.append("loopback request cancelled")
                raise
            return "answer"

        async def call() -> None:  # the SDK's task: the request's context, not its cancellation
            try:
                happened.append(await while_caller_stays(loopback))
            except RunStopped as exc:
                happened.append(f"stopped: {exc}")

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await receive()
            await asyncio.create_task(call())
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        first = [{"type": "http.request", "body": b"{}", "more_body": False}]

        async def receive() -> Any:
            if first:
                return first.pop()
            await (began.wait() if leaves else gone.wait())
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "POST", "path": path, "headers": []}
        await CallerWatch(app)(scope, receive, send)

    asyncio.run(main())
    return happened, statuses


def test_an_mcp_or_a2a_caller_leaving_cancels_the_loopback_request_of_its_run() -> None:
    assert _caller("/mcp", leaves=False) == (["answer"], [200])
    assert _caller("/mcp", leaves=True) == (["loopback request cancelled", f"stopped: {LEFT}"], [200])
    # an A2A answer is cancelled whole, with its loopback request: nothing is sent to the caller who left
    happened, statuses = _caller("/a2a/chat", leaves=True)
    assert happened[0] == "loopback request cancelled" and statuses == []
    assert _caller("/a2a/chat", leaves=False) == (["answer"], [200])
    assert _caller("/threads", leaves=False) == (["answer"], [200])  # not watched: no caller to be told of
