"""A request's work is bounded and known before it starts: model calls, served runs after a disconnect, folders."""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from doubles.chat import ScriptedChatModel
from nodes.ingest import ingest
from stores.errors import InputError, TooLarge
from stores.models import LLM, messages, use_chat_model
from stores.usage import CallBudget
from surfaces.cli import main
from surfaces.disconnect import LEFT
from tests.unit.test_collection import write_docs


def _namespace_of_documents(folder: Path, count: int) -> list[str]:
    """``count`` small documents ingested into namespace ``default`` (a few chunks each at chunk size 120)."""
    names = tuple(f"doc{i:02d}.md" for i in range(count))
    return [ingest(str(p), chunk_size=120, chunk_overlap=20).doc_id for p in write_docs(folder, names, sentences=30)]


# --- model calls --------------------------------------------------------------------------------------
def test_a_run_never_makes_more_model_calls_than_its_bound_even_from_parallel_threads() -> None:
    from stores.usage import CallsSpent, call_budget, calls_left

    model = ScriptedChatModel(default="A reply.")
    refused: list[str] = []

    def one(_i: int) -> None:
        try:
            LLM("worker", cache=False).text(messages("system", "user"))
        except CallsSpent as exc:
            refused.append(str(exc))

    with use_chat_model(model), call_budget(7) as budget:
        assert budget is not None and calls_left() == 7
        contexts = [contextvars.copy_context() for _ in range(40)]  # as LangGraph runs each node step
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda pair: pair[0].run(one, pair[1]), zip(contexts, range(40), strict=True)))
        assert calls_left() == 0
    assert len(model.calls) == 7 and len(refused) == 33
    assert "bound of 7 model calls (LONGDOC_MAX_MODEL_CALLS)" in refused[0]
    assert issubclass(CallsSpent, TooLarge)


def test_nested_bounds_take_each_call_from_both_and_none_is_charged_past_either() -> None:
    from stores.usage import CallsSpent, call_budget, calls_left

    model = ScriptedChatModel(default="A reply.")
    with use_chat_model(model), call_budget(5) as outer:
        with call_budget(2) as inner:
            for _ in range(2):
                LLM("worker", cache=False).text(messages("s", "u"))
            with pytest.raises(CallsSpent):
                LLM("worker", cache=False).text(messages("s", "u"))
        assert outer is not None and inner is not None and (outer.made, inner.made) == (2, 2)
        assert calls_left() == 3
    assert len(model.calls) == 2


def test_the_bound_is_a_setting_and_zero_lifts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.usage import call_budget, calls_left

    assert calls_left() == 200  # the default, with no request's budget open
    monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "0")
    with call_budget() as budget:
        assert budget is None and calls_left() is None
    monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "many")
    with pytest.raises(InputError, match="LONGDOC_MAX_MODEL_CALLS must be an integer"):
        calls_left()


def test_map_reduce_over_a_whole_namespace_past_the_bound_is_refused_before_its_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from doubles.replies import summarize_chat_model
    from surfaces.serve import create_app

    _namespace_of_documents(tmp_path / "docs", 3)
    monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "5")
    model = summarize_chat_model()
    with use_chat_model(model):
        code = main(["summarize", "--method", "map-reduce"])  # no path: the whole namespace
    err = capsys.readouterr().err
    assert code == 2 and "map-reduce over" in err and "of 3 documents" in err, err
    assert "bound of 5" in err and "LONGDOC_MAX_MODEL_CALLS" in err
    assert model.calls == []
    body = {"input": {"whole_namespace": True, "method": "refine"}, "config": {"configurable": {"chunk_size": 120}}}
    with TestClient(create_app(chat_model=model)) as client:
        reply = client.post("/summarize/invoke", json=body)
    assert reply.status_code == 413 and "refine over" in reply.json()["detail"], reply.text
    assert "LONGDOC_MAX_MODEL_CALLS" in reply.json()["detail"] and model.calls == []


def test_a_served_run_stops_at_its_bound_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from doubles.replies import summarize_chat_model
    from surfaces.serve import create_app

    doc_id = _namespace_of_documents(tmp_path / "docs", 2)[0]
    monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "3")
    model = summarize_chat_model()
    body = {"input": {"doc_id": doc_id, "length": 40}, "config": {"configurable": {"chunk_size": 120}}}
    with TestClient(create_app(chat_model=model)) as client:
        reply = client.post("/summarize/invoke", json=body)
        assert reply.status_code == 413 and "bound of 3 model calls" in reply.json()["detail"], reply.text
        assert len(model.calls) == 3
        monkeypatch.setenv("LONGDOC_MAX_MODEL_CALLS", "200")  # each request has a bound of its own
        again = client.post("/summarize/invoke", json=body)
    assert again.status_code == 200, again.text


# --- folders ------------------------------------------------------------------------------------------
def _small_files(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"note{i:03d}.md").write_text(f"# Note {i}\n\nWell {i} gave {i} litres on day {i}.\n")
    return folder


def test_a_folder_over_the_document_limit_is_refused_before_any_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import nodes.ingest_dir
    from doubles.replies import summarize_chat_model
    from nodes.ingest_dir import ingest_directory
    from stores.documents import list_documents
    from surfaces.serve import create_app

    root = tmp_path / "root"
    folder = _small_files(root / "notes", 6)
    read: list[str] = []
    real = nodes.ingest_dir.load_path
    monkeypatch.setattr(nodes.ingest_dir, "load_path", lambda path, enc=None: read.append(path.name) or real(path, enc))
    monkeypatch.setenv("LONGDOC_MAX_DOCUMENTS", "5")
    with pytest.raises(TooLarge, match=r"more than 5 document files, over the 5 one run may read \(LONGDOC_MAX_DOC"):
        ingest_directory(folder)
    assert main(["ingest", str(folder)]) == 2 and "LONGDOC_MAX_DOCUMENTS" in capsys.readouterr().err
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    model = summarize_chat_model()
    with TestClient(create_app(chat_model=model)) as client:
        whole_root = client.post("/summarize/invoke", json={"input": {"path": ".", "length": 30}})
    assert whole_root.status_code == 413 and "LONGDOC_MAX_DOCUMENTS" in whole_root.json()["detail"], whole_root.text
    assert read == [] and list_documents("default") == [] and model.calls == []
    monkeypatch.setenv("LONGDOC_MAX_DOCUMENTS", "6")
    assert len(ingest_directory(folder).indexed) == 6 and len(read) == 6


def test_more_documents_than_a_run_may_read_is_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.collection.resolve import resolve_documents
    from tests.unit.test_collection import _Ctx

    docs = _namespace_of_documents(tmp_path / "docs", 3)
    monkeypatch.setenv("LONGDOC_MAX_DOCUMENTS", "2")
    for values in ({"doc_ids": docs}, {"whole_namespace": True}):
        with pytest.raises(TooLarge, match=r"3 documents is over the 2 a run may read \(LONGDOC_MAX_DOCUMENTS\)"):
            resolve_documents(values, _Ctx())


def test_the_folder_manifest_is_a_table_written_one_row_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    import nodes.ingest_dir
    from nodes.ingest_dir import Manifest, ingest_directory
    from stores.vectorstore import get_store

    folder = _small_files(tmp_path / "notes", 4)
    real = nodes.ingest_dir.index_document
    done: list[str] = []

    def dies_on_the_third(doc, store, **kwargs):  # type: ignore[no-untyped-def]
        if len(done) == 2:
            raise KeyboardInterrupt  # the process stopped half-way
        done.append(doc.title)
        return real(doc, store, **kwargs)

    monkeypatch.setattr(nodes.ingest_dir, "index_document", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        ingest_directory(folder)
    path = Manifest(get_store("default")).path
    assert path.suffix == ".sqlite" and not path.with_suffix(".json").exists()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT path, doc_id, chunks FROM files ORDER BY path").fetchall()
    assert [Path(r[0]).name for r in rows] == ["note000.md", "note001.md"] and all(r[1] and r[2] for r in rows)
    monkeypatch.setattr(nodes.ingest_dir, "index_document", real)
    again = ingest_directory(folder)
    assert [Path(i["path"]).name for i in again.skipped] == ["note000.md", "note001.md"] and len(again.indexed) == 2


def test_a_manifest_left_as_json_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import nodes.ingest_dir
    from nodes.ingest_dir import ingest_directory
    from stores.settings import get_settings
    from stores.vectorstore import get_store

    folder = _small_files(tmp_path / "notes", 2)
    first = ingest_directory(folder)
    manifest = get_settings().home / "manifests" / f"{get_store('default').collection_name}"
    manifest.with_suffix(".sqlite").unlink()
    entries = {}
    for item in first.indexed:
        st = Path(item["path"]).stat()
        entries[str(Path(item["path"]).resolve())] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "doc_id": item["doc_id"],
            "chunks": item["chunks"],
        }
    manifest.with_suffix(".json").write_text(json.dumps(entries))
    monkeypatch.setattr(nodes.ingest_dir, "load_path", lambda *_a, **_k: pytest.fail("an unchanged file was read"))
    again = ingest_directory(folder)
    assert len(again.skipped) == 2 and not again.indexed and not manifest.with_suffix(".json").exists()


# --- a client that leaves -----------------------------------------------------------------------------
class _Gate:
    """A summarize reply that holds call ``at`` until released, counting every call."""

    def __init__(self, at: int) -> None:
        self.at, self.count = at, 0
        self.lock, self.reached, self.release = threading.Lock(), threading.Event(), threading.Event()
        self.returned = threading.Event()
        """The held call has returned."""

    def __call__(self, messages):  # type: ignore[no-untyped-def]
        from doubles.replies import summarize_reply

        with self.lock:
            self.count += 1
            hold = self.count == self.at
        if not hold:
            return summarize_reply(messages)
        self.reached.set()
        try:
            self.release.wait(30)
            return summarize_reply(messages)
        finally:
            self.returned.set()


class _Served:
    """An ASGI app that notes each POST it has finished with (answered, failed or given up on)."""

    def __init__(self, app: Any) -> None:
        self.app, self.ended = app, queue.Queue[str]()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http" and scope["method"] == "POST":
                self.ended.put(scope["path"])


def _leave_mid_run(url: str, route: str, gate: _Gate, served: _Served, stopped: queue.Queue[str]) -> int:
    """Ask for a refine summary (one call per chunk, in turn) and leave while call ``gate.at`` is in flight; once
    the server has stopped the run's budget, let that call finish: the calls made when the request has ended."""
    import json
    import socket
    from urllib.parse import urlsplit

    text = "# Wells\n\n" + "\n\n".join(
        f"## Well {i}\n\nWell {i} near Nakuru gave {i} litres on day {i}. Team {i} checked its pump." for i in range(30)
    )
    config = {"chunk_size": 60, "chunk_overlap": 10}
    body = json.dumps({"input": {"text": text, "method": "refine"}, "config": {"configurable": config}})
    host = urlsplit(url)
    client = socket.create_connection((host.hostname, host.port))
    head = f"POST {route} HTTP/1.1\r\nHost: {host.netloc}\r\nContent-Type: application/json\r\n"
    client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode())
    assert gate.reached.wait(30), "the run did not reach its third model call"
    client.close()  # the client leaves while a model call is in flight
    assert stopped.get(timeout=30) == LEFT  # the server noticed: the request's budget is stopped
    gate.release.set()
    assert served.ended.get(timeout=30) == route and gate.returned.wait(30)
    return gate.count


@pytest.mark.enable_socket
def test_a_served_run_whose_client_leaves_starts_no_more_model_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    from doubles import endpoint as fake_endpoint
    from surfaces import disconnect
    from surfaces.serve import create_app

    stopped: queue.Queue[str] = queue.Queue()

    def noting(budget: CallBudget) -> Callable[[], None]:
        def stop() -> None:
            budget.stop(LEFT)
            stopped.put(LEFT)

        return stop

    monkeypatch.setattr(disconnect, "stopper", noting)
    # A stream is cancelled by LangServe itself (sse_starlette); an invoke, whose handler nothing cancels, is
    # stopped by its bound on model calls: without it the invoke would end after all 30 calls.
    gates = [_Gate(at=3), _Gate(at=3)]
    models = [ScriptedChatModel(default=gate) for gate in gates]
    served = _Served(create_app(chat_model=lambda _role: models[0]))
    with fake_endpoint.running(served) as url:
        for route, gate in zip(("/summarize/stream", "/summarize/invoke"), gates, strict=True):
            seen = _leave_mid_run(url, route, gate, served, stopped)
            assert seen == gate.count == 3, route  # the call in flight finished; none started after the client left
            models.pop(0)


def test_runs_stop_on_disconnect_as_each_aegra_endpoint_says() -> None:
    from deploy.app import stops_on_disconnect

    assert stops_on_disconnect("/threads/t1/runs/wait", {})
    assert stops_on_disconnect("/threads/t1/runs/stream", {"on_disconnect": "cancel"})
    assert stops_on_disconnect("/threads/t1/runs/stream/", {})
    assert not stops_on_disconnect("/threads/t1/runs/stream", {"on_disconnect": "continue"})
    assert not stops_on_disconnect("/threads/t1/runs", {})  # a background run goes on without its client


def test_a_stopped_budget_refuses_every_call_on_any_thread() -> None:
    import asyncio

    from stores.usage import RunStopped, run_budget
    from surfaces.disconnect import stopper, until_disconnect

    model = ScriptedChatModel(default="A reply.")
    sent: list[dict[str, object]] = []
    messages_in = [{"type": "http.request", "body": b"{}", "more_body": False}, {"type": "http.disconnect"}]
    leave, noticed = asyncio.Event(), asyncio.Event()

    async def receive() -> dict[str, object]:
        if len(messages_in) == 1:
            await leave.wait()
        return messages_in.pop(0)

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        assert (await receive())["type"] == "http.request"
        LLM("worker", cache=False).text(messages("s", "u"))  # before the client leaves: sent
        leave.set()
        await asyncio.wait_for(noticed.wait(), 30)
        with pytest.raises(RunStopped, match=LEFT):
            await asyncio.to_thread(LLM("worker", cache=False).text, messages("s", "u"))

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    def stop_and_note(budget: CallBudget) -> Callable[[], None]:
        def stop() -> None:
            stopper(budget)()
            noticed.set()

        return stop

    with use_chat_model(model), run_budget(None) as budget:
        asyncio.run(until_disconnect(app, {"type": "http"}, receive, send, stop_and_note(budget)))
    assert len(model.calls) == 1 and budget.left() == 0 and budget.stopped == LEFT


def _six_calls(model: ScriptedChatModel, leave: Callable[[], object], noticed: threading.Event | None) -> None:
    """Six model calls; after the third the client leaves (``leave``) and, when the server watches the connection,
    the run waits for it to notice (``noticed``: the disconnect was read) before the next."""
    for _ in range(6):
        LLM("worker", cache=False).text(messages("s", "u"))
        if len(model.calls) == 3:
            leave()
            if noticed is not None:
                assert noticed.wait(30), "the server did not read the disconnect"


def _aegra_run(path: str, extra: dict[str, str], watched: bool) -> tuple[int, list[str], int]:
    """A run through the guard in front of Aegra, with an app that runs it as Aegra does (a task of its own), the
    client gone after the run's third model call (``watched``: the guard is to watch its connection): the calls
    made, how the run ended and how many times the connection was read."""
    import asyncio
    import json

    from deploy.app import TenantGuard
    from stores.errors import ModelError

    model = ScriptedChatModel(default="A reply.")
    outcome: list[str] = []
    runs: list[asyncio.Task[None]] = []
    noticed, reads = threading.Event(), list[int]()

    async def main() -> None:
        loop, gone = asyncio.get_running_loop(), asyncio.Event()

        def run() -> None:
            try:
                _six_calls(model, lambda: loop.call_soon_threadsafe(gone.set), noticed if watched else None)
                outcome.append("finished")
            except ModelError as exc:  # the run's next call refused: RunStopped, a RunTimeout
                outcome.append(f"stopped: {exc}")

        async def aegra(scope, receive, send):  # type: ignore[no-untyped-def]
            await receive()
            runs.append(asyncio.create_task(asyncio.to_thread(run)))  # the run's task copies the request's context
            if not scope["path"].endswith("/runs"):
                await asyncio.gather(runs[0], return_exceptions=True)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        body = json.dumps({"assistant_id": "chain", "input": {"question": "?"}, **extra}).encode()
        first = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():  # type: ignore[no-untyped-def]
            reads.append(1)
            if first:
                return first.pop()
            await gone.wait()
            asyncio.get_running_loop().call_soon(noticed.set)  # after the reader has handled what it got
            return {"type": "http.disconnect"}

        async def send(_message):  # type: ignore[no-untyped-def]
            return None

        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        scope = {"type": "http", "method": "POST", "path": path, "headers": [*headers, (b"x-api-key", b"key-a")]}
        await TenantGuard(aegra)(scope, receive, send)
        await asyncio.gather(*runs, return_exceptions=True)

    with use_chat_model(model):
        asyncio.run(main())
    return len(model.calls), outcome, len(reads)


def test_an_aegra_run_whose_client_leaves_starts_no_more_model_calls_unless_it_may_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    LEFT = "the client disconnected before the answer: its run was stopped"
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", json.dumps({"team-a": "key-a"}))
    stopped = [f"stopped: {LEFT}"]
    assert _aegra_run("/threads/t1/runs/wait", {}, watched=True) == (3, stopped, 2)
    assert _aegra_run("/threads/t1/runs/stream", {}, watched=True) == (3, stopped, 2)  # on_disconnect: cancel
    # The connection is not read past the request: the run goes on without its client.
    assert _aegra_run("/threads/t1/runs/stream", {"on_disconnect": "continue"}, watched=False) == (6, ["finished"], 1)
    assert _aegra_run("/threads/t1/runs", {}, watched=False) == (6, ["finished"], 1)  # no client to lose
