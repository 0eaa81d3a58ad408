"""Every workflow against a model endpoint that misbehaves on purpose (``doubles.endpoint``).

The endpoint runs on loopback in a thread; each test points ``LONGDOC_BASE_URL`` at it with short
timeouts. Assertions: the exit code or HTTP status, a message naming the endpoint, a bound on what the
code waited for (``tests.clocks``: each request's timeouts and each back-off, not the wall clock, which a
busy machine stretches), and how many requests reached the endpoint (retries counted once across the
client and the graph's retry policies).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from doubles import endpoint as fake_endpoint
from stores.cache import reset_caches
from stores.endpoints import endpoint_gate
from stores.models import LLM, ModelError, ModelOutputError, messages
from stores.usage import track_usage
from surfaces import cli
from surfaces.serve import create_app
from tests.clocks import FakeClock, Waits, fake_deadline_clock, record_waits

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"
READ_TIMEOUT = 0.5
CONNECT_TIMEOUT = 0.5
RETRIES = 1
BACKOFF = 2.0
"""The longest back-off before a retry (the OpenAI client's first is at most 0.5 s, ``retry_after`` here 0.3 s)."""
WAIT_BOUND = (RETRIES + 1) * (CONNECT_TIMEOUT + READ_TIMEOUT) + RETRIES * BACKOFF
"""The most a failing call may wait: every attempt's connect and read timeouts and the back-off between them."""
BOUND = WAIT_BOUND + 4.0
"""A run deadline that only stops a stalled call from holding up a test."""

pytestmark = pytest.mark.enable_socket


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("LONGDOC_READ_TIMEOUT", str(READ_TIMEOUT))
    monkeypatch.setenv("LONGDOC_CONNECT_TIMEOUT", str(CONNECT_TIMEOUT))
    monkeypatch.setenv("LONGDOC_MAX_RETRIES", str(RETRIES))
    monkeypatch.setenv("LONGDOC_MODEL", "scripted")
    endpoint_gate.reset()
    yield
    endpoint_gate.reset()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    """What the code waits for from here on: each request's timeouts and each back-off sleep."""
    return record_waits(monkeypatch)


@pytest.fixture
def deadline_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Run deadlines on a fake clock, moved on only by what the code waits for (recorded in ``waits``)."""
    return fake_deadline_clock(monkeypatch)


@pytest.fixture
def clocked_waits(monkeypatch: pytest.MonkeyPatch, deadline_clock: FakeClock) -> Waits:
    """``waits`` that also move the run deadlines' clock: a deadline passes when the waits reach it."""
    return record_waits(monkeypatch, deadline_clock)


@pytest.fixture
def endpoint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[fake_endpoint.Script]:
    """A scripted endpoint answering with the test's ``fault`` (indirect parameter), served on loopback."""
    script = fake_endpoint.Script(fault=getattr(request, "param", "ok"), stall_seconds=30, retry_after=0.3)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
        monkeypatch.setenv("LONGDOC_BASE_URL", url + "/v1")
        script.url = url + "/v1"  # type: ignore[attr-defined]
        yield script


# --- the model layer ------------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", ["stall", "stall_reply"], indirect=True)
def test_a_stalled_endpoint_ends_in_a_clear_error_and_is_not_retried_again(
    endpoint: fake_endpoint.Script, waits: Waits
) -> None:
    with pytest.raises(ModelError, match="did not answer in time") as caught:
        LLM("worker").text(messages("s", "hello"))
    assert len(waits.timeouts) == len(endpoint.requests) == RETRIES + 1
    assert all(t == {"connect": CONNECT_TIMEOUT, "read": READ_TIMEOUT} for t in waits.timeouts)
    assert waits.most() <= WAIT_BOUND
    assert endpoint.url in str(caught.value)  # type: ignore[attr-defined]
    waits.clear()
    with pytest.raises(ModelError, match="not retried for another"):
        LLM("expert").text(messages("s", "hello again"))
    assert waits == Waits() and len(endpoint.requests) == RETRIES + 1  # refused at once: nothing sent or waited


def test_an_endpoint_that_refuses_connections_is_named(waits: Waits) -> None:
    with fake_endpoint.refusing() as refused, pytest.MonkeyPatch.context() as patch:
        url = refused + "/v1"
        patch.setenv("LONGDOC_BASE_URL", url)
        with pytest.raises(ModelError, match="cannot be reached") as caught:
            LLM("worker").text(messages("s", "hello"))
    assert url in str(caught.value) and len(waits.timeouts) == RETRIES + 1 and waits.most() <= WAIT_BOUND


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("error_500", "failed with HTTP 500"),
        ("rate_limited", "kept refusing with 429"),
        ("html", "not an OpenAI-compatible chat completion"),
        ("reset", "dropped the connection before its reply was complete"),
    ],
    indirect=["endpoint"],
)
def test_failing_replies_end_in_model_errors(endpoint: fake_endpoint.Script, message: str) -> None:
    with pytest.raises(ModelError, match=message) as caught:
        LLM("worker").text(messages("s", "hello"))
    assert endpoint.url in str(caught.value)  # type: ignore[attr-defined]
    assert len(endpoint.requests) <= RETRIES + 1


def test_retry_after_is_honoured_then_the_call_succeeds(endpoint: fake_endpoint.Script, waits: Waits) -> None:
    endpoint.faults = ["rate_limited"]
    with track_usage() as usage:
        text = LLM("worker").text(messages("s", "hello"))
    assert text == fake_endpoint.TEXT_REPLY and usage["worker"]["calls"] == 1
    assert waits.sleeps == [endpoint.retry_after] and len(endpoint.requests) == 2  # waited as Retry-After said


def test_a_truncated_text_reply_is_asked_again_then_refused(endpoint: fake_endpoint.Script) -> None:
    endpoint.faults = ["truncated"]
    text = LLM("worker").text(messages("s", "hello"), max_tokens=50)
    assert text == fake_endpoint.TEXT_REPLY
    budgets = [r["body"].get("max_completion_tokens", r["body"].get("max_tokens")) for r in endpoint.requests]
    assert budgets == [50, 100]
    endpoint.fault = "truncated"  # always cut, half-way through its one sentence
    with pytest.raises(ModelOutputError, match="cut at 100 tokens mid-sentence"):
        LLM("worker").text(messages("s", "hello"), max_tokens=50)
    assert len(endpoint.requests) == 4


def test_a_reply_cut_twice_keeps_only_its_complete_sentences() -> None:
    from stores.models import use_chat_model
    from tests.unit.test_model_layer_cache import AlwaysCut

    model = AlwaysCut(default="Bob Chen manages procurement [c2]. He joined the project in")
    with use_chat_model(model), track_usage() as usage:
        text = LLM("worker").text(messages("s", "who?"), max_tokens=20)
    assert text == "Bob Chen manages procurement [c2]." and usage["worker"]["truncated"] == 2
    assert len(model.calls) == 2


@pytest.mark.parametrize("endpoint", ["truncated", "non_json"], indirect=True)
def test_structured_replies_that_never_fit_are_refused(endpoint: fake_endpoint.Script) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str
        confidence: float

    with pytest.raises(ModelOutputError):
        LLM("worker", max_retries=1).structured(messages("s", "capital?"), Answer, max_tokens=40)


@pytest.mark.parametrize("endpoint", ["cut_stop"], indirect=True)
def test_a_reply_cut_although_the_endpoint_said_it_finished_is_a_failed_call(endpoint: fake_endpoint.Script) -> None:
    """``{"answer": "The document states this in its`` with ``finish_reason: stop``: asked again, then refused."""

    class Answer(BaseModel):
        answer: str
        citations: list[str] = Field(default_factory=list)

    with pytest.raises(ModelOutputError, match="cut off before it closes"):
        LLM("worker").structured(messages("s", "who?"), Answer)
    assert len(endpoint.requests) == RETRIES + 1
    assert all(r["body"]["response_format"]["type"] == "json_schema" for r in endpoint.requests)
    with pytest.raises(ModelOutputError, match="cut off mid-way, although the endpoint said it finished"):
        LLM("worker").text(messages("s", "who?"))
    assert len(endpoint.requests) == 2 * (RETRIES + 1)
    endpoint.fault, endpoint.faults = "ok", ["cut_stop"]  # cut once, whole on the retry: the whole reply
    assert LLM("worker").text(messages("s", "who?")) == fake_endpoint.TEXT_REPLY


@pytest.mark.parametrize(
    ("reply", "cut"),
    [
        ('{"answer": "The document states this in its', True),
        ('```json\n{"answer": "x", "citations": ["c0"', True),
        ("The document answers this", True),
        ("Bob Chen manages procurement [c2", True),
        ("\u9879\u76ee\u9884\u7b97\u4e3a", True),
        ("Bob Chen manages procurement [c2].", False),
        ("Bob Chen manages procurement. [c2]", False),
        ('He said "yes."', False),
        ("\u9879\u76ee\u9884\u7b97\u4e3a\u56db\u4e07\u6b27\u5143\u3002", False),
        ("Owners:\n- Bob Chen", False),
        ('{"answer": "whole"}', False),
    ],
)
def test_visibly_cut_plain_text_is_told_from_a_finished_reply(reply: str, cut: bool) -> None:
    from stores.replies import cut_reply

    assert bool(cut_reply(reply)) is cut


def test_a_cut_object_is_never_parsed_nor_an_object_inside_it() -> None:
    from stores.replies import parse_json_object

    for text in ('{"answer": "The document states this in its', '{"a": {"b": 1}, "c": "cut', 'Sure: {"answer": "x'):
        with pytest.raises(ValueError, match="cut off before it closes"):
            parse_json_object(text)
    assert parse_json_object('Here [see below]: {"a": 1}') == {"a": 1}


class Verdict(BaseModel):
    verdict: Literal["supported", "unsupported"]
    evidence: list[str] = Field(min_length=1)


def test_the_json_schema_path_shows_a_schema_error_to_the_model_then_accepts_and_caches(
    endpoint: fake_endpoint.Script,
) -> None:
    """``ChatOpenAI.with_structured_output(json_schema, method="json_schema")``, not streamed, as in production."""
    endpoint.faults = ["non_json"]
    llm = LLM("checker", cache=True, max_retries=2)
    with track_usage() as usage:
        verdict = llm.structured(messages("s", "is it so?"), Verdict, max_tokens=80)
    assert verdict == Verdict(verdict="supported", evidence=["c0"]) and usage["checker"]["calls"] == 2
    first, second = (r["body"] for r in endpoint.requests)
    for body in (first, second):
        assert not body.get("stream") and body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "Verdict"
        assert body["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == [
            "supported",
            "unsupported",
        ]
    shown = second["messages"][-1]["content"]
    assert "does not match the required JSON schema" in shown and "Reply again with one JSON object only" in shown
    assert second["messages"][-2]["role"] == "assistant"  # the refused reply, shown back
    # The accepted reply was cached with its parsed object: asked again, no request is sent.
    with track_usage() as cached:
        again = llm.structured(messages("s", "is it so?"), Verdict, max_tokens=80)
    assert again == verdict and cached["checker"]["cached"] == 1 and len(endpoint.requests) == 2


# --- whole workflows over HTTP and from the command line -----------------------------------------------
def _ingest(client: TestClient) -> str:
    response = client.post("/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
    assert response.status_code == 200, response.text
    return str(response.json()["output"]["doc_id"])


WORKFLOWS = {
    "summarize": lambda doc_id: {"doc_id": doc_id, "length": 40},
    "offload": lambda doc_id: {"question": "Who manages procurement?", "doc_id": doc_id},
    "chain": lambda doc_id: {"question": "Who manages procurement?", "doc_id": doc_id},
}


@pytest.mark.parametrize("endpoint", ["stall", "stall_reply", "reset", "error_500", "html"], indirect=True)
@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_workflows_answer_503_naming_the_endpoint_within_the_bound(
    endpoint: fake_endpoint.Script, workflow: str, waits: Waits
) -> None:
    with TestClient(create_app()) as client:
        doc_id = _ingest(client)
        waits.clear()
        response = client.post(f"/{workflow}/invoke", json={"input": WORKFLOWS[workflow](doc_id)})
    assert response.status_code == 503, response.text
    assert len(waits.timeouts) == len(endpoint.requests) and waits.most() <= WAIT_BOUND, waits
    assert endpoint.url in response.json()["detail"]  # type: ignore[attr-defined]
    if endpoint.fault != "html":
        # The graph's retry policies do not send the failed call again: one client's attempts in all.
        assert len(endpoint.requests) == RETRIES + 1


@pytest.mark.parametrize("endpoint", ["stall"], indirect=True)
def test_the_command_line_exits_3_on_a_stalled_endpoint(
    endpoint: fake_endpoint.Script, tmp_path: Path, capsys: pytest.CaptureFixture[str], waits: Waits
) -> None:
    script = tmp_path / "questions.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    code = cli.main(["summarize", str(FALCON), "-q", "--json"])
    assert code == 3 and len(endpoint.requests) == RETRIES + 1 and waits.most() <= WAIT_BOUND, waits
    assert endpoint.url in capsys.readouterr().err  # type: ignore[attr-defined]
    code = cli.main(["chat", str(FALCON), "--script", str(script), "-q"])
    assert code == 3


@pytest.mark.parametrize("endpoint", ["cut_stop"], indirect=True)
def test_the_command_line_refuses_a_cut_reply_that_claims_it_finished(
    endpoint: fake_endpoint.Script, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "questions.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    for argv in (
        ["ask", str(FALCON), "Who manages procurement?", "--json"],
        ["chat", str(FALCON), "--script", str(script)],
    ):
        assert cli.main([*argv, "-q"]) == 3
        out = capsys.readouterr()
        assert "cut off" in out.err and "The document" not in out.out


@pytest.mark.parametrize("endpoint", ["truncated", "cut_stop", "empty"], indirect=True)
@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_cut_or_empty_replies_never_become_the_answer(
    endpoint: fake_endpoint.Script, workflow: str, waits: Waits
) -> None:
    with TestClient(create_app()) as client:
        doc_id = _ingest(client)
        response = client.post(f"/{workflow}/invoke", json={"input": WORKFLOWS[workflow](doc_id)})
    assert response.status_code == 503, response.text
    assert "model" in response.json()["detail"]


@pytest.mark.parametrize("endpoint", ["non_json"], indirect=True)
def test_prose_where_json_was_required_is_refused_or_marked(endpoint: fake_endpoint.Script) -> None:
    with TestClient(create_app()) as client:
        doc_id = _ingest(client)
        chain = client.post("/chain/invoke", json={"input": WORKFLOWS["chain"](doc_id)})
        assert chain.status_code == 503 and "JSON" in chain.json()["detail"]
        chat = client.post("/offload/invoke", json={"input": WORKFLOWS["offload"](doc_id)})
        assert chat.status_code == 200
        answered = [c for c in chat.json()["output"]["calls"] if c["step"] == "answer"]
        assert answered[-1]["mode"] == "text"  # answered by the plain-text fallback, and says so
        summary = client.post("/summarize/invoke", json={"input": WORKFLOWS["summarize"](doc_id)}).json()["output"]
        assert summary["stop_reason"] == "editor_output_invalid"
        assert (
            summary["factcheck"]["supported"] == 0
            and summary["factcheck"]["unchecked"] == summary["factcheck"]["sentences"]
        )


def test_a_served_run_ends_at_the_run_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from doubles.chat import ScriptedChatModel
    from doubles.replies import offload_reply

    released = threading.Event()
    replies: list[str] = []

    def held(prompt: Any) -> str:
        """The scripted reply, given only once the test lets the model go."""
        released.wait(60)
        replies.append(offload_reply(prompt))
        return replies[-1]

    monkeypatch.setenv("LONGDOC_RUN_TIMEOUT", "1")
    with TestClient(create_app(chat_model=ScriptedChatModel(default=held))) as client:
        doc_id = _ingest(client)
        try:
            response = client.post("/offload/invoke", json={"input": WORKFLOWS["offload"](doc_id)})
            answered_first = list(replies)
        finally:
            released.set()
    assert response.status_code == 503 and "did not finish within 1 s" in response.json()["detail"]
    assert answered_first == []  # the answer came at the deadline, while the model still held its reply


@pytest.mark.parametrize("endpoint", ["stall"], indirect=True)
@pytest.mark.parametrize("command", ["ask", "summarize", "chat"])
def test_a_command_line_run_ends_at_the_run_deadline(
    endpoint: fake_endpoint.Script,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    clocked_waits: Waits,
) -> None:
    # Each call would wait 20 s for its reply; the whole run may take 1 s.
    monkeypatch.setenv("LONGDOC_READ_TIMEOUT", "20")
    monkeypatch.setenv("LONGDOC_RUN_TIMEOUT", "1")
    script = tmp_path / "questions.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    argv = {
        "ask": ["ask", str(FALCON), "Who manages procurement?", "--json"],
        "summarize": ["summarize", str(FALCON), "--json"],
        "chat": ["chat", str(FALCON), "--script", str(script)],
    }[command]
    code = cli.main([*argv, "-q"])
    err = capsys.readouterr().err
    assert code == 3, (code, err)
    assert "did not finish within 1 s (LONGDOC_RUN_TIMEOUT)" in err and err.count("\n") == 1
    # The first request waited until the deadline, not its 20 s read timeout, and was never sent again.
    assert clocked_waits.timeouts == [{"connect": CONNECT_TIMEOUT, "read": 1.0}] and len(endpoint.requests) == 1


# --- what a failed run leaves behind ---------------------------------------------------------------------
EVERY_FAULT = [mode for mode in fake_endpoint.FAULTS if mode != "ok"] + ["refuse"]
COMMANDS = ["ask", "summarize", "chat", "canvas"]


def _snapshot(home: Path) -> dict[str, str]:
    """Digest of every file of the data home but the checkpoints and the (empty) lock files: documents, vectors,
    offloaded turns, caches."""
    import hashlib

    return {
        str(path.relative_to(home)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(home.rglob("*"))
        if path.is_file() and not path.name.startswith("checkpoints.sqlite") and path.suffix != ".lock"
    }


def _open_store() -> None:
    """Open and search every collection of a copied store, as its first run does: Chroma then rewrites its index
    files once, which would otherwise show as a change made by the run under test."""
    from stores.vectorstore import get_client

    for collection in get_client().list_collections():
        first = collection.get(limit=1, include=["embeddings"])
        if first["ids"]:
            collection.query(query_embeddings=[first["embeddings"][0]], n_results=1)


def _checkpoints(thread: str) -> list[str]:
    from stores.checkpoint import open_checkpointer

    with open_checkpointer() as saver:
        return [c.config["configurable"]["checkpoint_id"] for c in saver.list({"configurable": {"thread_id": thread}})]


def _pending(command: str, thread: str) -> tuple[str, ...]:
    """The steps the thread's last run still has to do (none when it finished)."""
    from importlib import import_module

    from stores.checkpoint import open_checkpointer

    builder = import_module(
        {"ask": "graphs.chain.graph", "summarize": "graphs.summarize.graph", "chat": "graphs.offload.graph"}[command]
    ).builder
    with open_checkpointer() as saver:
        return tuple(builder.compile(checkpointer=saver).get_state({"configurable": {"thread_id": thread}}).next)


def _command(command: str, thread: str, folder: Path) -> list[str]:
    script = folder / "questions.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    return {
        "ask": ["ask", str(FALCON), "Who manages procurement?", "--json", "--thread-id", thread],
        "summarize": ["summarize", str(FALCON), "--length", "40", "--json", "--thread-id", thread],
        "chat": ["chat", str(FALCON), "--script", str(script), "--session", thread],
        # A canvas is made once per document and namespace: each run has its own namespace.
        "canvas": ["canvas", str(FALCON), "--json", "--namespace", thread],
    }[command] + ["-q"]


@dataclass
class Prepared:
    """A data home as each failing run of a command starts: its reference run done, and what that run printed."""

    home: Path
    reference: dict[str, Any]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Prepared]:
    """The reference run of a command, made once per test process and copied into each case's data home."""
    made: dict[str, Prepared] = {}

    def make(command: str) -> Prepared:
        if command in made:
            return made[command]
        folder = tmp_path_factory.mktemp(f"reference-{command}")
        home = folder / "home"
        script = fake_endpoint.Script(stall_seconds=30, retry_after=0.3)
        with pytest.MonkeyPatch.context() as patch, fake_endpoint.running(fake_endpoint.create_app(script)) as url:
            patch.setenv("LONGDOC_HOME", str(home))
            patch.setenv("LONGDOC_BASE_URL", url + "/v1")
            reset_caches()
            endpoint_gate.reset()
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                assert cli.main(_command(command, "reference", folder)) == 0
                reference = json.loads(out.getvalue().splitlines()[-1])
                if command == "chat":  # the session has a finished turn before the one that fails
                    first = ["chat", str(FALCON), "--script", str(folder / "questions.json"), "--session", "run", "-q"]
                    assert cli.main(first) == 0
                    reference["turn"] = 2
                if command == "canvas":  # the document is in the run's namespace before the canvas fails
                    assert cli.main(["ingest", str(FALCON), "--namespace", "run", "-q"]) == 0
            reset_caches()
            endpoint_gate.reset()
        made[command] = Prepared(home=home, reference=reference)
        return made[command]

    return make


RESUMED = [pytest.param(command, marks=pytest.mark.xdist_group(f"resume-{command}")) for command in COMMANDS]
"""Each command's cases in one test process, which makes its reference run once."""


@pytest.mark.parametrize("fault", EVERY_FAULT)
@pytest.mark.parametrize("command", RESUMED)
def test_a_failed_run_leaves_the_store_unchanged_and_its_checkpoints_resumable(
    fault: str,
    command: str,
    tmp_path: Path,
    longdoc_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    prepared: Callable[[str], Prepared],
    waits: Waits,
) -> None:
    start = prepared(command)
    shutil.copytree(start.home, longdoc_home, dirs_exist_ok=True)
    reset_caches()
    _open_store()
    reference = start.reference
    script = fake_endpoint.Script(stall_seconds=30, retry_after=0.3)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url, fake_endpoint.refusing() as refused:
        before, saved = _snapshot(longdoc_home), _checkpoints("run")

        script.fault = "ok" if fault == "refuse" else fault
        monkeypatch.setenv("LONGDOC_BASE_URL", (refused if fault == "refuse" else url) + "/v1")
        endpoint_gate.reset()
        code = cli.main(_command(command, "run", tmp_path))
        captured = capsys.readouterr()
        if code != 0:
            assert code == 3 and captured.err.count("\n") == 1 and "model" in captured.err, captured.err
            assert _snapshot(longdoc_home) == before  # nothing half-written in the store
            after = _checkpoints("run")
            assert after[len(after) - len(saved) :] == saved  # older checkpoints untouched, new ones only added

        if code == 0 and command == "canvas":  # the outline drawn instead, and marked so
            result = json.loads(captured.out.splitlines()[-1])
            assert result["source"] == "outline" and "model" in result["error"], result
            return
        if code == 0:  # the fault gave a result (a marked or shortened one): the run is complete
            assert not _pending(command, "run")
            return
        # Complete: with the endpoint back, the same command finishes the run, as an uninterrupted one would.
        script.fault = "ok"
        monkeypatch.setenv("LONGDOC_BASE_URL", url + "/v1")
        endpoint_gate.reset()
        assert cli.main(_command(command, "run", tmp_path)) == 0
        again = json.loads(capsys.readouterr().out.splitlines()[-1])
    keys = {
        "ask": ("answer", "read", "calls"),
        "summarize": ("summary",),
        "chat": ("turn", "answer"),
        "canvas": ("source", "nodes", "mermaid"),
    }[command]
    assert [again[k] for k in keys] == [reference[k] for k in keys]
    if command != "canvas":
        assert not _pending(command, "run")


@pytest.mark.parametrize("endpoint", ["stall"], indirect=True)
def test_a_longdoc_process_exits_at_the_run_deadline(endpoint: fake_endpoint.Script, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    # Each request would wait 600 s for its reply, three times: the process must not wait for them. It exits
    # long before one read timeout is over (the guard below is a fifth of it: start-up on a busy machine fits
    # many times over), and its cut request is never sent again.
    endpoint.stall_seconds = 900
    env = {**os.environ, "LONGDOC_READ_TIMEOUT": "600", "LONGDOC_MAX_RETRIES": "2", "LONGDOC_RUN_TIMEOUT": "3"}
    command = [sys.executable, "-m", "surfaces.cli", "summarize", str(FALCON), "-q"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=FALCON.parents[2])
    assert done.returncode == 3 and "did not finish within 3 s" in done.stderr, done.stderr
    assert len(endpoint.requests) <= 1


# --- the bundled server: streamed with prompt progress, one request per slot, alive while it progresses ---------
STALL = 0.6
"""The bundled server's stall limit here (``LONGDOC_BUNDLED_STALL``; 120 s by default)."""
CHECK = 0.05
"""How often a silent bundled request looks at the server here (``LONGDOC_BUNDLED_CHECK``; 2 s by default)."""


@pytest.fixture
def bundled(monkeypatch: pytest.MonkeyPatch) -> Iterator[fake_endpoint.Script]:
    """A scripted endpoint standing in for the process's bundled llama.cpp server (one slot)."""
    from stores import local_model

    monkeypatch.setenv("LONGDOC_BUNDLED_STALL", str(STALL))
    monkeypatch.setenv("LONGDOC_BUNDLED_CHECK", str(CHECK))
    script = fake_endpoint.Script(slots=1)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
        port = int(url.rsplit(":", 1)[1])
        server = local_model.LocalServer(
            handle=None, port=port, model="scripted", path=Path("scripted.gguf"), n_ctx=8192
        )
        local_model.servers.put(local_model.BUNDLED, server)  # forgotten by the reset after the test
        monkeypatch.delenv("LONGDOC_BASE_URL", raising=False)
        script.url = server.base_url  # type: ignore[attr-defined]
        yield script


def test_the_bundled_servers_stall_limit_is_its_own_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.errors import InputError
    from stores.settings import BUNDLED_STALL, get_settings

    assert get_settings().read_timeout_for(None) == BUNDLED_STALL == 120  # LONGDOC_READ_TIMEOUT is 0.5 here
    assert get_settings().read_timeout_for("http://127.0.0.1:1/v1") == READ_TIMEOUT
    monkeypatch.setenv("LONGDOC_BUNDLED_STALL", "45")
    assert get_settings().read_timeout_for(None) == 45
    monkeypatch.setenv("LONGDOC_BUNDLED_CHECK", "0")
    with pytest.raises(InputError, match="LONGDOC_BUNDLED_CHECK must be more than 0"):
        get_settings()


def test_a_long_prompt_on_the_bundled_server_outlasts_the_read_timeout_while_it_reports_progress(
    bundled: fake_endpoint.Script,
) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str

    # Reading the prompt takes 4 read timeouts; a progress report comes every 0.2 s of it.
    bundled.prompt_seconds, bundled.progress_every = 4 * READ_TIMEOUT, 0.2
    start = time.monotonic()
    with track_usage() as usage:
        text = LLM("worker").text(messages("s", "hello"))
    parsed = LLM("worker").structured(messages("s", "capital?"), Answer)
    assert text == fake_endpoint.TEXT_REPLY and usage["worker"]["calls"] == 1
    assert parsed.answer == fake_endpoint.sample({"type": "string"})  # the schema's smallest instance, parsed
    assert len(bundled.requests) == 2 and time.monotonic() - start >= 2 * bundled.prompt_seconds
    bodies = [r["body"] for r in bundled.requests]
    assert all(b["stream"] and b["return_progress"] for b in bodies)
    assert (
        bodies[1]["response_format"]["json_schema"]["schema"]["properties"] == Answer.model_json_schema()["properties"]
    )


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The bundled request's watch counts time in looks at the server: one check interval each, however long a
    busy machine makes it (so the stall limit is 12 looks that find no progress, not 0.6 s of wall clock)."""
    from stores import liveness

    clock = FakeClock()
    silent = liveness.Watch.silent

    def looked(watch: liveness.Watch) -> None:
        clock.advance(watch.check)
        silent(watch)

    monkeypatch.setattr(liveness, "time", clock)
    monkeypatch.setattr(liveness.Watch, "silent", looked)
    return clock


def test_a_bundled_server_whose_counters_move_while_its_reply_is_silent_is_waited_for(
    bundled: fake_endpoint.Script, looks: FakeClock
) -> None:
    # Reading the prompt takes 4 stall limits (8 of the old 0.5 s silence limit) without a byte of reply, as a
    # prompt batch does on a busy machine; the server's /slots counters move every 0.1 s of it.
    bundled.prompt_seconds, bundled.progress_every, bundled.stream_progress = 4 * STALL, 0.1, False
    start, looked = time.monotonic(), looks.now
    assert LLM("worker").text(messages("s", "hello")) == fake_endpoint.TEXT_REPLY
    assert time.monotonic() - start >= bundled.prompt_seconds and len(bundled.requests) == 1
    assert looks.now - looked >= STALL  # it looked at the server past a stall limit's worth of checks


def test_a_bundled_server_whose_threads_keep_computing_in_silence_is_waited_for(
    bundled: fake_endpoint.Script, monkeypatch: pytest.MonkeyPatch, looks: FakeClock
) -> None:
    import itertools

    from stores import liveness, local_model

    # The in-process server's own threads get CPU time at every look (a prompt batch being computed on a busy
    # machine) while its reply and its /slots stay still for 4 stall limits.
    server = local_model.servers.get(local_model.BUNDLED)
    assert server is not None
    server.handle = object()  # running in this process: its threads are looked at
    ticks = itertools.count()
    monkeypatch.setattr(liveness, "native_cpu", lambda pid=None: {4242: next(ticks)})
    bundled.prompt_seconds = 4 * STALL
    assert LLM("worker").text(messages("s", "hello")) == fake_endpoint.TEXT_REPLY
    assert len(bundled.requests) == 1
    monkeypatch.setattr(liveness, "native_cpu", lambda pid=None: {4242: 7})  # the threads stop working: a stall
    with pytest.raises(ModelError, match="made no progress"):
        LLM("worker").text(messages("s", "hello again"))


def test_a_bundled_server_that_makes_no_progress_fails_clearly_at_its_stall_limit(
    bundled: fake_endpoint.Script,
) -> None:
    bundled.prompt_seconds = 30.0  # silent: no progress report, no token, its counters still
    start = time.monotonic()
    with pytest.raises(ModelError, match=f"made no progress for {STALL:g} s") as caught:
        LLM("worker").text(messages("s", "hello"))
    assert time.monotonic() - start >= STALL  # waited out the stall limit
    assert bundled.prompts_read == 0  # and no more: the server was still reading the prompt when the call gave up
    assert bundled.url in str(caught.value) and "LONGDOC_BUNDLED_STALL" in str(caught.value)  # type: ignore[attr-defined]
    assert len(bundled.requests) == 1  # not sent again to a stuck server
    with pytest.raises(ModelError, match="made no progress"):  # the next call fails at once (endpoint gate)
        LLM("worker").text(messages("s", "hello again"))
    assert len(bundled.requests) == 1


def test_a_bundled_server_stopped_mid_reply_fails_at_once(
    bundled: fake_endpoint.Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from stores import local_model

    monkeypatch.setenv("LONGDOC_BUNDLED_STALL", "30")
    bundled.prompt_seconds = 60.0  # waiting for the reply would end at the stall limit, in another error

    def stop_once_asked() -> None:  # the server stops while it reads the request's prompt
        while not bundled.requests:
            time.sleep(0.01)
        local_model.servers.pop(local_model.BUNDLED)

    stopper = threading.Thread(target=stop_once_asked, daemon=True)
    stopper.start()
    with pytest.raises(ModelError, match="stopped while answering"):
        LLM("worker").text(messages("s", "hello"))
    stopper.join(timeout=5)
    assert bundled.prompts_read == 0  # given up while the server still read the prompt


def test_the_run_deadline_holds_while_the_bundled_server_keeps_working(bundled: fake_endpoint.Script) -> None:
    from stores.deadlines import run_deadline
    from stores.errors import RunTimeout

    bundled.prompt_seconds, bundled.progress_every, bundled.stream_progress = 30.0, 0.05, False
    with run_deadline(1.0), pytest.raises(RunTimeout, match="did not finish within 1 s"):
        LLM("worker").text(messages("s", "hello"))
    assert bundled.prompts_read == 0 and len(bundled.requests) == 1  # cut while the server read the prompt


LONG_PROMPT = "word " * 400
"""A prompt the scripted server reads in four batches, reporting after each."""


def test_a_long_prompt_is_shown_as_status_in_the_custom_stream_and_in_stream_events(
    bundled: fake_endpoint.Script,
) -> None:
    import asyncio

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from stores.status import STATUS_EVENT

    class State(TypedDict):
        reply: str

    def ask(state: State) -> State:
        return {"reply": LLM("worker").text(messages("s", LONG_PROMPT))}

    graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END).compile()
    bundled.prompt_seconds, bundled.progress_every = 0.2, 0.05
    custom = [chunk for chunk in graph.stream({"reply": ""}, stream_mode="custom")]
    assert custom and all(c["stage"] == "model" and 0 < c["prompt"]["read"] < c["prompt"]["total"] for c in custom)
    read, total = custom[0]["prompt"]["read"], custom[0]["prompt"]["total"]
    assert custom[0]["message"] == f"reading the prompt: {read:,}/{total:,} tokens"

    async def events() -> list[dict[str, Any]]:
        return [e async for e in graph.astream_events({"reply": ""}, version="v2")]

    shown = [e["data"] for e in asyncio.run(events()) if e["event"] == "on_custom_event" and e["name"] == STATUS_EVENT]
    assert [e["message"] for e in shown] == [c["message"] for c in custom]


def test_a_served_stream_shows_the_status_of_a_long_prompt(bundled: fake_endpoint.Script) -> None:
    with TestClient(create_app()) as client:
        doc_id = _ingest(client)
        bundled.prompt_seconds, bundled.progress_every = 0.08, 0.04
        body = {"input": WORKFLOWS["chain"](doc_id)}
        response = client.post("/chain/stream_events", json=body)
    assert response.status_code == 200 and "event: error" not in response.text, response.text
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    shown = [e["data"]["message"] for e in events if e.get("event") == "on_custom_event"]
    assert shown and all(m.startswith("reading the prompt: ") for m in shown), shown


def test_the_command_line_shows_a_long_prompt_on_stderr_unless_quiet(
    bundled: fake_endpoint.Script, capsys: pytest.CaptureFixture[str]
) -> None:
    bundled.prompt_seconds, bundled.progress_every = 0.2, 0.05
    question = "Who manages procurement?"
    assert cli.main(["ask", str(FALCON), question, "--chunk-size", "120", "--no-stream"]) == 0
    shown = capsys.readouterr()
    assert "reading the prompt: " in shown.err and "reading the prompt" not in shown.out
    assert cli.main(["ask", str(FALCON), question, "--chunk-size", "120", "--json"]) == 0
    shown = capsys.readouterr()
    assert "reading the prompt: " in shown.err and json.loads(shown.out)["answer"]  # stdout: the one JSON object
    assert cli.main(["ask", str(FALCON), question, "--chunk-size", "120", "--json", "-q"]) == 0
    shown = capsys.readouterr()
    assert "reading the prompt" not in shown.err and json.loads(shown.out)["answer"]


def test_requests_queued_for_the_bundled_servers_slot_start_their_clock_when_sent(
    bundled: fake_endpoint.Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import httpx

    from stores import local_model

    # Each request keeps the one slot 0.35 s without a byte: three at once wait 1.05 s in all. Each is sent only
    # once the slot is its own, with its whole time to make progress (counted, not timed: a busy machine changes
    # neither).
    bundled.prompt_seconds = 0.35
    monkeypatch.setenv("LONGDOC_BUNDLED_STALL", "5")
    slots = local_model.servers.get(local_model.BUNDLED).slots  # type: ignore[union-attr]
    sent: list[tuple[bool, object]] = []
    send = httpx.HTTPTransport.handle_request

    def sending(transport: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chat/completions"):  # not the looks at the server's /health and /slots
            sent.append((slots._value == 0, (request.extensions.get("timeout") or {}).get("read")))  # type: ignore[attr-defined]
        return send(transport, request)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", sending)
    errors: list[BaseException] = []

    def ask(i: int) -> None:
        try:
            LLM("worker").text(messages("s", f"question {i}"))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert sent == [(True, 5.0)] * 3  # each sent holding the slot, with its whole read timeout
    assert len(bundled.requests) == 3 and bundled.busy_most == 1  # nothing retried, one at a time


# --- the run deadline in any thread ------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint", ["stall"], indirect=True)
def test_the_run_deadline_holds_on_any_thread(
    endpoint: fake_endpoint.Script, monkeypatch: pytest.MonkeyPatch, deadline_clock: FakeClock, clocked_waits: Waits
) -> None:
    import threading

    from stores.errors import RunTimeout

    monkeypatch.setenv("LONGDOC_READ_TIMEOUT", "20")  # each call alone would wait 20 s, twice
    outcome: dict[str, tuple[str, float, int]] = {}

    def run() -> None:
        with cli.deadline(1):
            for name, role in (("first", "worker"), ("second", "expert")):
                start, sent = deadline_clock.now, len(clocked_waits.timeouts)
                try:
                    LLM(role).text(messages("s", f"hello from the {role}"))
                except RunTimeout as exc:
                    outcome[name] = (str(exc), deadline_clock.now - start, len(clocked_waits.timeouts) - sent)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    # The first call waits for the deadline (its 20 s read timeout cut to 1 s) and the client's back-off before
    # the retry the deadline refuses; the second is refused at once.
    message = "the run did not finish within 1 s (LONGDOC_RUN_TIMEOUT)"
    assert sum(clocked_waits.sleeps) <= BACKOFF
    assert outcome["first"] == (message, 1.0 + sum(clocked_waits.sleeps), 1)
    assert outcome["second"] == (message, 0.0, 0)
    assert clocked_waits.timeouts == [{"connect": CONNECT_TIMEOUT, "read": 1.0}]
    assert len(endpoint.requests) == 1  # the cut request is not sent again, the next one never sent


@pytest.mark.parametrize("endpoint", ["stall"], indirect=True)
def test_a_served_run_past_its_deadline_sends_no_more_model_requests(
    endpoint: fake_endpoint.Script, monkeypatch: pytest.MonkeyPatch, clocked_waits: Waits
) -> None:
    import threading

    ended = threading.Event()
    call = LLM._call

    def ending(self: LLM, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self, *args, **kwargs)
        finally:
            ended.set()

    monkeypatch.setattr(LLM, "_call", ending)
    monkeypatch.setenv("LONGDOC_READ_TIMEOUT", "6")
    monkeypatch.setenv("LONGDOC_RUN_TIMEOUT", "3")
    with TestClient(create_app()) as client:
        doc_id = _ingest(client)
        response = client.post("/offload/invoke", json={"input": WORKFLOWS["offload"](doc_id)})
        assert response.status_code == 503 and "did not finish within 3 s" in response.text, response.text
        # The model call in the worker thread goes on past the answer; once it has ended, nothing more is sent.
        assert ended.wait(60), "the worker thread's model call did not end"
    # Its request waited for the deadline, not the 6 s read timeout, and was not sent again.
    assert clocked_waits.timeouts == [{"connect": CONNECT_TIMEOUT, "read": 3.0}], clocked_waits
    assert len(endpoint.requests) == 1, endpoint.requests


# --- route: its model step is the embedder, here an OpenAI-compatible endpoint ---------------------------
@pytest.mark.parametrize("fault", EVERY_FAULT)
def test_an_embedding_endpoint_fails_clearly_within_the_bound(fault: str, waits: Waits) -> None:
    from stores.endpoints import EndpointEmbeddings

    script = fake_endpoint.Script(fault="ok" if fault == "refuse" else fault, stall_seconds=30, retry_after=0.3)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as served, fake_endpoint.refusing() as refused:
        url = refused if fault == "refuse" else served
        embedder = EndpointEmbeddings(url + "/v1", None, "scripted-embed")
        with pytest.raises(ModelError) as caught:
            embedder.embed_documents(["Bob Chen manages procurement.", "The supplier is Acme."])
    assert url + "/v1" in str(caught.value) and "embedding" in str(caught.value), caught.value
    assert len(script.requests) <= len(waits.timeouts) <= RETRIES + 1 and waits.most() <= WAIT_BOUND, waits


def test_an_embedding_endpoint_that_answers_embeds(endpoint: fake_endpoint.Script) -> None:
    from stores.endpoints import EndpointEmbeddings

    endpoint.faults = ["rate_limited"]
    embedder = EndpointEmbeddings(endpoint.url, None, "scripted-embed")  # type: ignore[attr-defined]
    vectors = embedder.embed_documents(["one", "two"])
    assert len(vectors) == 2 and len(vectors[0]) == fake_endpoint.EMBED_DIM
    assert embedder.embed_query("one") == vectors[0] and len(endpoint.requests) == 3


@pytest.mark.parametrize("fault", EVERY_FAULT)
def test_route_with_an_endpoint_embedder_fails_clearly_and_leaves_the_store_unchanged(
    fault: str,
    longdoc_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    waits: Waits,
) -> None:
    from stores import embedders, vectorstore

    def switch(url: str) -> None:  # a new embedder for the new URL, in new stores
        monkeypatch.setenv("LONGDOC_EMBED_BASE_URL", url)
        embedders._cached.cache_clear()
        vectorstore.reset_stores()
        endpoint_gate.reset()

    monkeypatch.setenv("LONGDOC_EMBEDDER", "openai")
    argv = ["route", "summarize a long report", "--json", "-q"]
    script = fake_endpoint.Script(stall_seconds=30, retry_after=0.3)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url, fake_endpoint.refusing() as refused:
        switch(url + "/v1")
        assert cli.main(argv) == 0  # registers the built-in registry, then routes
        reference = json.loads(capsys.readouterr().out.splitlines()[-1])
        before = _snapshot(longdoc_home)

        script.fault = "ok" if fault == "refuse" else fault
        failing = (refused if fault == "refuse" else url) + "/v1"
        switch(failing)
        # A stalled embedder must not hold the test (set here: the first run imports Chroma, slow on a busy machine).
        monkeypatch.setenv("LONGDOC_RUN_TIMEOUT", str(BOUND))
        waits.clear()
        code = cli.main(argv)  # the request's embedding fails
        err = capsys.readouterr().err
        assert code == 3 and err.count("\n") == 1 and failing in err, (code, err)
        assert len(waits.timeouts) <= RETRIES + 1 and waits.most() <= WAIT_BOUND, waits
        assert _snapshot(longdoc_home) == before

        script.fault = "ok"
        switch(url + "/v1")
        assert cli.main(argv) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1]) == reference
    embedders._cached.cache_clear()
    vectorstore.reset_stores()
