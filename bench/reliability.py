"""Reliability benchmark: faults survived, runs resumed, bad inputs refused, tenants kept apart, knobs bounded.

    python -m bench.reliability --out bench/results/reliability.json [--interruptions 12] [--kills 12]
        [--concurrency 40] [--suites faults,interruptions,kills,bad_inputs,concurrency,index,retention,tenants,
        budgets,dev_server,work_bounds,door,door_limits]

Everything runs in a scratch ``LONGDOC_HOME`` with scripted models and the scripted endpoint of
``doubles.endpoint`` on loopback (no weights, no network), through the LangServe app, ``langgraph dev``
and the ``longdoc`` command line. Each suite reports its seconds and the process's resident memory at
its start and at its peak (``memory_mb``, sampled every 0.1 s while it runs):

* ``faults``: every fault mode of the scripted endpoint (plus a port that refuses connections)
  against ask, summarize and chat over HTTP: ``survived`` when the server answered in time and still
  answers ``/health``, with a clear 503, or with a result that says it was made without the model's
  JSON (prose instead of JSON: chat's plain-text fallback, summarize's stopped editor); any other 200
  is a failed reply passed off as an answer. ``clear_errors`` when a failure is a 503 whose message
  names the model step; ``max_seconds`` the slowest; and ask, summarize and chat streamed from a
  server on a socket while the endpoint fails: ``streams_ended_with_an_error_event`` when the body
  arrives whole and ends with an error event naming a 503; and ``busy_bundled`` (:func:`busy_bundled`):
  ask against a stand-in for the bundled server of a busy machine, slower between progress reports
  than the old 30 s silence limit (times scaled by 1/60), answered, and a stuck one failing clearly;
* ``interruptions``: chat sessions whose model dies at a random call of the second turn (every
  retry included); the same question is sent again: ``clean_resumes`` when the turn number and the
  answer equal an uninterrupted run, ``repeated_calls`` the finished model calls asked again;
* ``kills``: ``longdoc chat`` (during its second turn), ``longdoc summarize --thread-id`` and
  ``longdoc ask --thread-id`` processes killed with SIGKILL while a random model request is in
  flight, and ``longdoc ingest`` processes (a document of a few hundred chunks) killed at a random
  moment of their indexing; then run again with the same arguments: ``clean_resumes`` when the
  result (turn and answer; summary; answer, chunks read, citations and calls; document id and
  chunks, and a third ingest finding it fully indexed) equals an uninterrupted run's,
  ``repeated_calls`` the requests answered before the kill and sent again;
* ``bad_inputs``: malformed files and requests on the command line (exit code 2 expected) and over
  HTTP (400, 403, 413, 415 or 422 expected): a stray byte, an unknown encoding, text of only
  headings or zero-width characters, a .docx zip bomb, a PDF of 3,000 pages, a batch of 2,000
  inputs, ``NaN``, JSON nested 1,000 deep, a body that is not JSON, a lone surrogate, invalid UTF-8,
  a 5,000-digit integer; and a tenant naming another tenant's thread id (expected: the answer an
  unused id gets). ``clear_errors`` counts the one-line messages with the right code (and that
  thread case when it held);
* ``concurrency``: concurrent ingests of one text and chat turns on their own threads: errors and
  p50/p95 latency;
* ``index``: six concurrent re-chunks of one document over HTTP (chunk sizes 900, 300, 600) per
  round, ``consistent_rounds`` when its record, visible and stored chunks agree after them; and a
  re-index at chunk size 300 of a document indexed at 900 killed with SIGKILL at four points (half-way
  through its first or second batch of chunks, just before or just after its record is written):
  ``whole_after_kill`` when a whole index is in use (the previous one until the record switched),
  ``clean_after_next_ingest`` when the next ingest leaves the new index and nothing else;
* ``retention``: the live files searched as the running server leaves them (no write-ahead log
  checkpointed first; Chroma's SQLite file included): ``leaks`` counts the checkpoint files holding an
  upload, a chat's ``text``, a question refused before its run or one refused by its run after its
  first checkpoint; ``left_after_forget`` the files still holding a thread or a document forgotten
  over HTTP, and what remains of a namespace after ``forget`` (:func:`retention`);
* ``tenants``: two tenants sharing a namespace (one naming the other's chat session, thread or
  ``forget``) and two turns at once on one thread (:func:`tenants`);
* ``budgets``: every bounded setting sent past its bound, a route of 60,000 requests, a 100,000-character
  thread id, and documents without spaces asked, summarized and chatted over: the largest model request
  (:func:`budgets`);
* ``door``: the LangServe app's door (:func:`door`): a 14 MB HTML page and 213 KB of nested tags refused in
  bounded seconds and memory (``seconds``, ``rss_rise_mb``), every workflow's refused input leaving the data home
  as it was, a route batch of 100 x 100 requests refused, stateless requests leaving no checkpoint, and
  malformed bodies answered with a 4xx and a reason on every route;
* ``dev_server``: ``langgraph dev`` as ``make dev`` runs it, called from a foreign origin, a rebound
  host and Studio, and asked to move the endpoint or read files outside the ingest root
  (:func:`dev_server`);
* ``work_bounds``: map-reduce over a namespace of 53 documents, a run past its bound on model calls, a
  served run whose client leaves half-way and a folder of 12,000 files (:func:`work_bounds`);
* ``door_limits``: attachments per message, another tenant's wait during an upload, malformed JSON on
  ``langgraph dev`` and its log (:mod:`bench.reliability_door`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.options import chosen
from bench.reliability_door import door_limits
from bench.reliability_leave import leave, leave_failures
from bench.reliability_owners import owners, owners_failures
from doubles.chat import ScriptedChatModel
from doubles.files import docx_bomb, pdf_with_text
from stores.documents import write_atomic

ROOT = Path(__file__).resolve().parents[1]
FALCON = ROOT / "notebooks" / "data" / "falcon.md"
QUESTION = "Who manages procurement?"


class DiesAt(ScriptedChatModel):
    """The scripted chat model, failing like a dead endpoint at calls ``first`` .. ``first + count - 1``."""

    first: int = 0
    count: int = 0
    seen: int = 0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        self.seen += 1
        if self.first and self.first <= self.seen < self.first + self.count:
            raise ConnectionError("the endpoint died")
        return super()._generate(messages, stop, run_manager, **kwargs)


@contextlib.contextmanager
def scratch_home() -> Iterator[Path]:
    """A fresh ``LONGDOC_HOME`` with the hash embedder, restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("LONGDOC_HOME", "LONGDOC_EMBEDDER", "LONGDOC_BASE_URL", "LONGDOC_MODEL")}
    with tempfile.TemporaryDirectory(prefix="longdoc-reliability-") as tmp:
        os.environ.update(LONGDOC_HOME=str(Path(tmp) / "home"), LONGDOC_EMBEDDER="hash")
        os.environ.pop("LONGDOC_BASE_URL", None)
        from stores.vectorstore import reset_stores

        reset_stores()
        try:
            yield Path(tmp)
        finally:
            reset_stores()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _client(chat_model: Any = None, *, raise_server_exceptions: bool = True) -> Any:
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    return TestClient(create_app(chat_model=chat_model), raise_server_exceptions=raise_server_exceptions)


def _ingest(client: Any) -> str:
    response = client.post("/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
    response.raise_for_status()
    return str(response.json()["output"]["doc_id"])


WORKFLOWS: dict[str, Callable[[str], dict[str, Any]]] = {
    "ask": lambda doc_id: {"question": QUESTION, "doc_id": doc_id},
    "summarize": lambda doc_id: {"doc_id": doc_id, "length": 40},
    "chat": lambda doc_id: {"question": QUESTION, "doc_id": doc_id},
}
ROUTES = {"ask": "chain", "summarize": "summarize", "chat": "offload"}


# --- faults --------------------------------------------------------------------------------------


def faults(read_timeout: float = 0.5, retries: int = 1) -> dict[str, Any]:
    """Each fault mode x workflow over HTTP."""
    from doubles import endpoint as fake_endpoint
    from stores.endpoints import endpoint_gate

    os.environ.update(
        LONGDOC_READ_TIMEOUT=str(read_timeout),
        LONGDOC_CONNECT_TIMEOUT="0.5",
        LONGDOC_MAX_RETRIES=str(retries),
        LONGDOC_MODEL="scripted",
    )
    bound = (retries + 1) * (read_timeout + 2.0) + 3.0
    modes = [m for m in fake_endpoint.FAULTS if m != "ok"] + ["refuse"]
    rows = []
    for mode in modes:
        script = fake_endpoint.Script(fault=mode if mode != "refuse" else "ok", stall_seconds=60, retry_after=0.3)
        with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
            base = url if mode != "refuse" else f"http://127.0.0.1:{fake_endpoint.free_port()}"
            os.environ["LONGDOC_BASE_URL"] = base + "/v1"
            for workflow, make in WORKFLOWS.items():
                endpoint_gate.reset()
                with _client() as client:
                    doc_id = _ingest(client)
                    start = time.monotonic()
                    response = client.post(f"/{ROUTES[workflow]}/invoke", json={"input": make(doc_id)})
                    seconds = time.monotonic() - start
                    healthy = client.get("/health").status_code == 200
                detail = response.json().get("detail", "") if response.status_code != 200 else ""
                # A fault is survived as a clear 503, or as a result that says how it was made without the model's
                # JSON (prose instead of JSON: chat's plain-text fallback, summarize's stopped editor); any other
                # 200 would be a failed reply passed off as an answer.
                result = response.json().get("output", {}) if response.status_code == 200 else {}
                marked = _marked(workflow, result)
                answered = response.status_code == 503 or (
                    response.status_code == 200 and mode == "non_json" and marked
                )
                rows.append(
                    {
                        "fault": mode,
                        "workflow": workflow,
                        "status": response.status_code,
                        "seconds": round(seconds, 2),
                        "survived": answered and seconds < bound and healthy,
                        "clear_error": response.status_code == 503 and "model" in detail,
                        "detail": detail[:200],
                    }
                )
    streams = _failing_streams()
    busy = busy_bundled()
    for key in ("LONGDOC_READ_TIMEOUT", "LONGDOC_CONNECT_TIMEOUT", "LONGDOC_MAX_RETRIES", "LONGDOC_BASE_URL"):
        os.environ.pop(key, None)
    failures = [r for r in rows if r["status"] != 200]
    return {
        "injected": len(rows),
        "survived": sum(r["survived"] for r in rows),
        "failed_runs": len(failures),
        "clear_errors": sum(r["clear_error"] for r in failures),
        "max_seconds": max(r["seconds"] for r in rows),
        "bound_seconds": bound,
        "failing_streams": len(streams),
        "streams_ended_with_an_error_event": sum(r["whole"] for r in streams),
        "busy_bundled": busy,
        "busy_bundled_held": sum(r["held"] for r in busy),
        "runs": rows,
        "streams": streams,
    }


BUSY_SCALE = 60.0
"""How many times faster than the real bundled server the busy cases run (1 s here is a minute there)."""


def busy_bundled() -> list[dict[str, Any]]:
    """Ask over HTTP against a scripted stand-in for the bundled server of a busy machine, times scaled by 1/60.

    The old liveness rule cut a bundled reply silent for 30 s (0.5 s here). Cases: prompt-progress reports every
    45 s for 3 minutes; a stream silent for 3 minutes while the server's ``/slots`` counters move every 15 s
    (a prompt batch on a loaded machine); and a server that makes no progress at all, which must end in a 503
    naming it within the stall limit (``LONGDOC_BUNDLED_STALL``, 120 s: 2 s here) and its retries.
    ``held`` when the two slow servers answer (200) and the stuck one fails clearly and in time.
    """
    from doubles import endpoint as fake_endpoint
    from stores import local_model
    from stores.endpoints import endpoint_gate

    scale = BUSY_SCALE
    knobs = ("LONGDOC_BUNDLED_STALL", "LONGDOC_BUNDLED_CHECK", "LONGDOC_READ_TIMEOUT", "LONGDOC_BASE_URL")
    saved = {key: os.environ.get(key) for key in knobs}
    # LONGDOC_READ_TIMEOUT: the old silence limit, scaled (it no longer applies to the bundled server).
    os.environ.update(LONGDOC_BUNDLED_STALL=str(120 / scale), LONGDOC_BUNDLED_CHECK=str(2 / scale))
    os.environ["LONGDOC_READ_TIMEOUT"] = str(30 / scale)
    os.environ.pop("LONGDOC_BASE_URL", None)
    cases: dict[str, dict[str, Any]] = {
        "progress reports every 45 s": {"prompt_seconds": 180 / scale, "progress_every": 45 / scale},
        "silent stream, /slots moving every 15 s": {
            "prompt_seconds": 180 / scale,
            "progress_every": 15 / scale,
            "stream_progress": False,
        },
        "no progress at all": {"prompt_seconds": 600 / scale},
    }
    rows = []
    for case, play in cases.items():
        script = fake_endpoint.Script(slots=1, **play)
        with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
            port = int(url.rsplit(":", 1)[1])
            server = local_model.LocalServer(
                handle=None, port=port, model="scripted", path=Path("scripted.gguf"), n_ctx=8192
            )
            local_model.servers.put(local_model.BUNDLED, server)
            endpoint_gate.reset()
            try:
                with _client() as client:
                    doc_id = _ingest(client)
                    start = time.monotonic()
                    response = client.post("/chain/invoke", json={"input": WORKFLOWS["ask"](doc_id)})
                    seconds = time.monotonic() - start
            finally:
                local_model.servers.pop(local_model.BUNDLED)
        detail = response.json().get("detail", "") if response.status_code != 200 else ""
        stuck = case == "no progress at all"
        held = (
            response.status_code == 503 and "made no progress" in detail and seconds < 4 * 120 / scale
            if stuck
            else response.status_code == 200
        )
        rows.append(
            {
                "case": case,
                "status": response.status_code,
                "seconds": round(seconds, 2),
                "as_real_seconds": round(seconds * scale),
                "requests": len(script.requests),
                "held": held,
                "detail": detail[:200],
            }
        )
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    return rows


def _failing_streams() -> list[dict[str, Any]]:
    """Ask, summarize and chat streamed from a LangServe app served over a socket while the endpoint answers 500:
    ``whole`` when the body arrives complete (no connection dropped half-way) and its last event is an error
    naming a 503 (the runs' earlier events came first)."""
    import logging

    import httpx

    from doubles import endpoint as fake_endpoint
    from stores.endpoints import endpoint_gate
    from surfaces.serve import create_app

    rows = []
    served = logging.getLogger("surfaces.serve")
    level = served.level
    served.setLevel(logging.CRITICAL)  # each stream's failure is expected here: no traceback in the output
    with (
        fake_endpoint.running(fake_endpoint.create_app(fake_endpoint.Script(fault="error_500"))) as model,
        contextlib.ExitStack() as restore,
    ):
        restore.callback(served.setLevel, level)
        os.environ["LONGDOC_BASE_URL"] = model + "/v1"
        with fake_endpoint.running(create_app()) as url:
            doc = httpx.post(f"{url}/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
            doc_id = doc.json()["output"]["doc_id"]
            for workflow, make in WORKFLOWS.items():
                endpoint_gate.reset()
                try:
                    with httpx.stream(
                        "POST", f"{url}/{ROUTES[workflow]}/stream", json={"input": make(doc_id)}
                    ) as reply:
                        text = "".join(reply.iter_text())
                except httpx.HTTPError as exc:  # a body cut half-way
                    rows.append({"workflow": workflow, "whole": False, "error": type(exc).__name__})
                    continue
                events = [block for block in text.split("\r\n\r\n") if block.strip()]
                last = events[-1] if events else ""
                status = json.loads(last.split("data: ", 1)[1]).get("status_code") if "data: " in last else None
                rows.append({"workflow": workflow, "whole": last.startswith("event: error") and status == 503})
    return rows


def _marked(workflow: str, result: dict[str, Any]) -> bool:
    """Whether a result made while the model answered in prose says so (chat: a call in ``text`` mode; summarize:
    the editor stopped, ``editor_output_invalid``)."""
    if workflow == "chat":
        return any(call.get("mode") == "text" for call in result.get("calls", []))
    if workflow == "summarize":
        return result.get("stop_reason") == "editor_output_invalid"
    return False


# --- interruptions -----------------------------------------------------------------------------
def _session(model: ScriptedChatModel, doc_id: str, thread: str, *, resend: bool) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    from graphs.offload.graph import builder
    from stores.errors import ModelError
    from stores.models import use_chat_model
    from surfaces.resume import plan

    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": thread}}
    out: dict[str, Any] = {}
    with use_chat_model(model):
        graph.invoke({"question": "Who leads engineering?", "doc_id": doc_id}, config)
        request = {"question": QUESTION, "doc_id": doc_id}
        try:
            out = graph.invoke(*plan(graph, request, config))
            died = False
        except ModelError:
            died = True
        if died and resend:
            out = graph.invoke(*plan(graph, request, config))
    return {"died": died, "turn": out.get("turn"), "answer": out.get("answer")}


def interruptions(count: int, seed: int = 7) -> dict[str, Any]:
    """Chat turns that die at a random model call, then are sent again."""
    from doubles.replies import offload_reply as scripted_reply
    from nodes.ingest import ingest

    doc_id = ingest(str(FALCON)).doc_id
    _session(DiesAt(default=scripted_reply), doc_id, "cold", resend=False)  # draws the document's canvas, kept after
    reference_model = DiesAt(default=scripted_reply)
    reference = _session(reference_model, doc_id, "reference", resend=False)
    first_turn = _first_turn_calls(DiesAt(default=scripted_reply), doc_id)
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        at = rng.randint(first_turn + 1, reference_model.seen)
        model = DiesAt(default=scripted_reply, first=at, count=2)  # the call, and the graph's retry of it
        result = _session(model, doc_id, f"run-{i}", resend=True)
        succeeded = len(model.calls)
        rows.append(
            {
                "dies_at_call": at,
                "died": result["died"],
                "clean_resume": result["turn"] == reference["turn"] and result["answer"] == reference["answer"],
                "repeated_calls": max(0, succeeded - len(reference_model.calls)),
            }
        )
    return {
        "interruptions": sum(r["died"] for r in rows),
        "clean_resumes": sum(r["clean_resume"] for r in rows if r["died"]),
        "repeated_calls": sum(r["repeated_calls"] for r in rows),
        "model_calls_per_uninterrupted_session": len(reference_model.calls),
        "runs": rows,
    }


def _first_turn_calls(model: ScriptedChatModel, doc_id: str) -> int:
    from langgraph.checkpoint.memory import InMemorySaver

    from graphs.offload.graph import builder
    from stores.models import use_chat_model

    graph = builder.compile(checkpointer=InMemorySaver())
    with use_chat_model(model):
        graph.invoke({"question": "Who leads engineering?", "doc_id": doc_id}, {"configurable": {"thread_id": "one"}})
    return len(model.calls)


# --- kill -9 -----------------------------------------------------------------------------------------
def _process(env: dict[str, str], argv: list[str]) -> Any:
    import subprocess

    command = [sys.executable, "-m", "surfaces.cli", *argv, "-q"]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _chat(folder: Path, session: str, question: str) -> list[str]:
    script = folder / f"{session}-{abs(hash(question))}.json"
    script.write_text(json.dumps([question]), encoding="utf-8")
    return ["chat", str(FALCON), "--script", str(script), "--session", session]


def _summarize(thread: str) -> list[str]:
    # A namespace per run: the experts' per-document answer cache must not serve one run from another.
    return ["summarize", str(FALCON), "--length", "40", "--thread-id", thread, "--json", "--namespace", thread]


RESULT_KEYS = ("turn", "answer", "summary", "read", "citations", "calls", "doc_id", "chunks")
"""What a run's last JSON line must repeat after a resume (the keys it has)."""


def _finish(proc: Any, timeout: float = 300) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    last = lines[-1] if lines else {}
    result = {k: last[k] for k in RESULT_KEYS if k in last}
    return {"code": proc.returncode, "result": result, "cached": last.get("cached"), "stderr": err[-500:]}


def _ask(thread: str) -> list[str]:
    return ["ask", str(FALCON), QUESTION, "--read-all", "--thread-id", thread, "--json"]


def _ingest_command(document: Path, namespace: str) -> list[str]:
    return ["ingest", str(document), "--namespace", namespace, "--json"]


def _large_document(folder: Path, sections: int = 400, seed: int = 5) -> Path:
    """A document of a few hundred chunks, so that an ingest spends seconds chunking, embedding and writing."""
    rng = random.Random(seed)
    words = FALCON.read_text(encoding="utf-8").split()
    parts = [f"## Section {i}\n\n" + " ".join(rng.choice(words) for _ in range(700)) for i in range(sections)]
    path = folder / "large.md"
    path.write_text("# A large document\n\n" + "\n\n".join(parts) + "\n", encoding="utf-8")
    return path


def _timed(env: dict[str, str], argv: list[str]) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    result = _finish(_process(env, argv))
    return result, time.monotonic() - start


def kills(points: int, folder: Path, seed: int = 11) -> dict[str, Any]:
    """``longdoc chat`` (second turn), ``longdoc summarize --thread-id`` and ``longdoc ask --thread-id``
    processes killed with SIGKILL while a random model request is in flight, and ``longdoc ingest``
    processes killed at a random moment of their indexing; each then run again with the same arguments."""
    from doubles import endpoint as fake_endpoint

    # Stalled requests never end: one answered long after its process was killed would count as
    # answered before the kill of a later run.
    script = fake_endpoint.Script(stall_seconds=3600)
    rng = random.Random(seed)
    rows = []
    large = _large_document(folder)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
        env = {**os.environ, "LONGDOC_BASE_URL": url + "/v1", "LONGDOC_MODEL": "scripted", "LONGDOC_MAX_RETRIES": "0"}
        cases: dict[str, Callable[[str], tuple[list[str] | None, list[str]]]] = {
            "chat": lambda name: (_chat(folder, name, "Who leads engineering?"), _chat(folder, name, QUESTION)),
            "summarize": lambda name: (None, _summarize(name)),
            "chain": lambda name: (None, _ask(name)),
            "ingest": lambda name: (None, _ingest_command(large, name)),
        }
        for index, (workflow, make) in enumerate(cases.items()):
            before, command = make(f"reference-{workflow}")
            if before:
                _finish(_process(env, before))
            start = len(script.requests)
            reference, full_seconds = _timed(env, command)
            total = len(script.requests) - start
            if workflow == "ingest":  # the same command on an indexed document: everything but the indexing
                _, setup_seconds = _timed(env, command)
            for i in range(points // len(cases) + (1 if points % len(cases) > index else 0)):
                before, command = make(f"killed-{workflow}-{i}")
                if before:
                    _finish(_process(env, before))
                start, answered = len(script.requests), script.answered
                if workflow == "ingest":
                    upper = full_seconds
                    for attempt in range(3):
                        at: float = round(rng.uniform(setup_seconds, upper), 2)
                        proc = _process(env, command)
                        time.sleep(at)
                        if proc.poll() is None or attempt == 2:
                            break
                        # It finished before its kill (the machine is faster than when the reference was
                        # timed): a new document name, and a point drawn before this one.
                        proc.communicate()
                        upper = at
                        before, command = make(f"killed-{workflow}-{i}-{attempt + 1}")
                else:
                    at = rng.randint(1, total)
                    script.faults = ["ok"] * (at - 1) + ["stall"]
                    proc = _process(env, command)
                    deadline = time.monotonic() + 120
                    # Wait for the chosen request (stalled by the endpoint), then kill the process.
                    while len(script.requests) < start + at and time.monotonic() < deadline and proc.poll() is None:
                        time.sleep(0.05)
                    time.sleep(0.2)  # let requests running beside the stalled one finish, as they would
                proc.kill()
                proc.communicate()
                killed = proc.returncode == -signal.SIGKILL
                script.faults = []
                done_before_kill = script.answered - answered
                restart = len(script.requests)
                again = _finish(_process(env, command))
                sent_again = len(script.requests) - restart
                clean = again["code"] == 0 and again["result"] == reference["result"]
                if workflow == "ingest":  # complete: a third run finds every chunk indexed and embeds nothing
                    third = _finish(_process(env, command))
                    clean = clean and third["code"] == 0 and third["cached"] is True
                    clean = clean and third["result"] == reference["result"]
                rows.append(
                    {
                        "workflow": workflow,
                        "killed_at": at,
                        "killed": killed,
                        "clean_resume": clean,
                        "repeated_calls": max(0, sent_again - (total - done_before_kill)),
                        "stderr": again["stderr"] if again["code"] else "",
                    }
                )
    return {
        "kills": sum(r["killed"] for r in rows),
        "clean_resumes": sum(r["clean_resume"] for r in rows if r["killed"]),
        "repeated_calls": sum(r["repeated_calls"] for r in rows if r["killed"]),
        "by_workflow": {w: sum(r["killed"] and r["workflow"] == w for r in rows) for w in cases},
        "runs": rows,
    }


# --- bad inputs ---------------------------------------------------------------------------------
def _broken_docx(path: Path) -> None:
    import docx

    good = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("Hello")
    document.save(good)
    with zipfile.ZipFile(io.BytesIO(good.getvalue())) as src, zipfile.ZipFile(path, "w") as out:
        for item in src.infolist():
            data = src.read(item.filename)
            out.writestr(item, data[: len(data) // 2] if item.filename == "word/document.xml" else data)


def bad_inputs(folder: Path) -> dict[str, Any]:
    """Malformed files and requests: the exit code or status and whether the message is one clear line."""
    from doubles.replies import offload_chat_model as fake_chat_model
    from stores.models import use_chat_model
    from surfaces import cli

    (folder / "empty.txt").write_text("   \n", encoding="utf-8")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (folder / "data.xyz").write_text("text", encoding="utf-8")
    (folder / "script.bin").write_bytes(b"\xff\xfe\x00\x81\x00\xc3")
    (folder / "long.json").write_text(json.dumps(["why " * 1500]), encoding="utf-8")
    (folder / "out.html").mkdir()
    _broken_docx(folder / "broken.docx")
    (folder / "prices.txt").write_bytes(b"The pump costs 10\xff euros.\n")
    (folder / "invisible.txt").write_text("\u200b\u200c\u200d\ufeff" * 100, encoding="utf-8")
    (folder / "headings.md").write_text("# Title\n\n## Part one\n\n## Part two\n", encoding="utf-8")
    unreadable = folder / "unreadable"  # a folder is a collection; one whose files are all unreadable is an error
    unreadable.mkdir(exist_ok=True)
    (unreadable / "empty.txt").write_text("   \n", encoding="utf-8")
    (unreadable / "binary.txt").write_bytes(bytes(range(256)) * 8)
    bomb, pages = docx_bomb(30), pdf_with_text("A page.", pages=3000)
    (folder / "bomb.docx").write_bytes(bomb)
    (folder / "pages.pdf").write_bytes(pages)
    doc = str(FALCON)
    cli_cases = {
        "missing file": ["ingest", str(folder / "nope.md")],
        "empty file": ["ingest", str(folder / "empty.txt")],
        "binary .txt": ["ingest", str(folder / "binary.txt")],
        "unsupported type": ["ingest", str(folder / "data.xyz")],
        "folder of unreadable files": ["ask", str(unreadable), "What is in it?"],
        "malformed .docx": ["ingest", str(folder / "broken.docx")],
        "invalid namespace": ["ingest", doc, "--namespace", "../x"],
        "binary chat script": ["chat", doc, "--script", str(folder / "script.bin")],
        "too long question": ["chat", doc, "--script", str(folder / "long.json")],
        "canvas --out on a folder": ["canvas", doc, "--out", str(folder / "out.html")],
        "summary length 0": ["summarize", doc, "--length", "0"],
        "stray byte in an ASCII .txt": ["ingest", str(folder / "prices.txt")],
        "unknown encoding": ["ingest", str(folder / "prices.txt"), "--encoding", "klingon"],
        "only zero-width characters": ["ingest", str(folder / "invisible.txt")],
        "only headings": ["ingest", str(folder / "headings.md")],
        "92 KB .docx of 30 MB XML": ["ingest", str(folder / "bomb.docx")],
        "PDF of 3,000 pages": ["ingest", str(folder / "pages.pdf")],
    }
    rows = []
    model = fake_chat_model()
    with use_chat_model(model):
        for name, argv in cli_cases.items():
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    code = cli.main([*argv, "-q"])
                except Exception as exc:  # noqa: BLE001 - a crash is exactly what this case counts
                    code, err = 1, io.StringIO(f"{type(exc).__name__}: {exc}\n")
            message = err.getvalue().strip()
            clear = code == 2 and message.count("\n") == 0 and "Traceback" not in message
            rows.append({"surface": "cli", "case": name, "code": code, "clear": clear, "message": message[:200]})
        as_json = {"content-type": "application/json"}
        http_cases: dict[str, tuple[str, dict[str, Any]]] = {
            "empty text": ("/ingest/invoke", {"input": {"text": "  "}}),
            "only zero-width characters": ("/ingest/invoke", {"input": {"text": "\u200b\u200d" * 100}}),
            "stray byte in an ASCII .txt": ("/ingest/invoke", _upload(b"The pump costs 10\xff euros.", "prices.txt")),
            "unknown encoding": ("/ingest/invoke", _upload(b"caf\xe9.", "a.txt", encoding="klingon")),
            "92 KB .docx of 30 MB XML": ("/ingest/invoke", _upload(bomb, "bomb.docx")),
            "PDF of 3,000 pages": ("/ingest/invoke", _upload(pages, "pages.pdf")),
            "batch of 2,000 inputs": ("/ingest/batch", {"inputs": [{"text": "Otters."}] * 2000}),
            "NaN in configurable": (
                "/ingest/invoke",
                {"content": b'{"input": {"text": "x"}, "config": {"configurable": {"chunk_size": NaN}}}'},
            ),
            "JSON nested 1,000 deep": (
                "/ingest/invoke",
                {"content": b'{"input": {"text": "x", "title": ' + b"[" * 1000 + b"]" * 1000 + b"}}"},
            ),
            "Content-Type text/plain": (
                "/ingest/invoke",
                {"content": b'{"input": {"text": "x"}}', "headers": {"content-type": "text/plain"}},
            ),
            "server path": ("/ingest/invoke", {"input": {"path": "/etc/passwd"}}),
            "model endpoint in config": (
                "/ingest/invoke",
                {"input": {"text": "x"}, "config": {"configurable": {"base_url": "http://evil/v1"}}},
            ),
            "invalid namespace": (
                "/ingest/invoke",
                {"input": {"text": "x"}, "config": {"configurable": {"namespace": "../x"}}},
            ),
            "too long question": ("/offload/invoke", {"input": {"question": "why " * 1500, "doc_id": "0" * 16}}),
            "unknown document": ("/summarize/invoke", {"input": {"doc_id": "0" * 16}}),
            "summary length 0": ("/summarize/invoke", {"input": {"doc_id": "0" * 16, "length": 0}}),
            "lone surrogate in JSON text": ("/ingest/invoke", {"content": b'{"input": {"text": "Otters \\ud800."}}'}),
            "invalid UTF-8 in a body": ("/ingest/invoke", {"content": b'{"input": {"text": "Otters \xff\xfe."}}'}),
            "5,000-digit integer": (
                "/ingest/invoke",
                {
                    "content": b'{"input": {"text": "x"}, "config": {"configurable": {"chunk_size": '
                    + b"9" * 5000
                    + b"}}}"
                },
            ),
        }
        with _client(model) as client:
            for name, (route, body) in http_cases.items():
                raw = "content" in body
                sent = {"headers": as_json, **body} if raw else {"json": body}
                response = client.post(route, **sent)
                detail = str(response.json().get("detail", ""))
                clear = response.status_code in (400, 403, 413, 415, 422) and bool(detail) and "\n" not in detail
                rows.append(
                    {
                        "surface": "http",
                        "case": name,
                        "code": response.status_code,
                        "clear": bool(clear),
                        "message": detail[:200],
                    }
                )
    rows.append(_foreign_thread_id())
    return {"tried": len(rows), "clear_errors": sum(r["clear"] for r in rows), "cases": rows}


def _upload(data: bytes, filename: str, **extra: str) -> dict[str, Any]:
    return {"input": {"data": base64.b64encode(data).decode(), "filename": filename, **extra}}


def _foreign_thread_id() -> dict[str, Any]:
    """A tenant naming another tenant's thread gets the answer an unused id gets (nothing tells it the id is taken)."""
    from doubles.replies import offload_chat_model as fake_chat_model

    saved = os.environ.get("LONGDOC_SERVER_KEYS")
    os.environ["LONGDOC_SERVER_KEYS"] = json.dumps({"alice": "alice-key", "bob": "bob-key"})
    try:
        with _client(fake_chat_model()) as client:

            def turn(key: str, thread: str, doc_id: str) -> Any:
                body = {
                    "input": {"question": QUESTION, "doc_id": doc_id},
                    "config": {"configurable": {"thread_id": thread}},
                }
                return client.post("/offload/invoke", json=body, headers={"X-API-Key": key})

            docs = {}
            for key in ("alice-key", "bob-key"):
                ingested = client.post(
                    "/ingest/invoke",
                    json={"input": {"text": FALCON.read_text(encoding="utf-8")}},
                    headers={"X-API-Key": key},
                )
                docs[key] = ingested.json()["output"]["doc_id"]
            turn("alice-key", "alice-session", docs["alice-key"])
            taken, unused = (
                turn("bob-key", "alice-session", docs["bob-key"]),
                turn("bob-key", "unused", docs["bob-key"]),
            )
    finally:
        if saved is None:
            os.environ.pop("LONGDOC_SERVER_KEYS", None)
        else:
            os.environ["LONGDOC_SERVER_KEYS"] = saved
    same = taken.status_code == unused.status_code == 200 and all(
        taken.json()["output"][k] == unused.json()["output"][k] for k in ("turn", "answer", "citations")
    )
    return {
        "surface": "http",
        "case": "another tenant's thread id",
        "code": taken.status_code,
        "clear": bool(same),
        "message": "" if same else f"{taken.status_code} vs {unused.status_code} for an unused id",
    }


# --- the request door: bounded HTML, checks before storing, stateless runs, malformed bodies ---------------
HTML_SECONDS, NESTED_SECONDS, HTML_RSS_MB = 2.0, 1.0, 100.0
"""What the HTML cases of :func:`door` must stay within: seconds to the answer, and the resident memory it adds."""

BAD_BODIES: dict[str, bytes] = {
    "empty": b"",
    "null": b"null",
    "a list": b"[1, 2]",
    "cut JSON": b'{"input": {"text": "Otters',
    "input of the wrong type": b'{"input": 5}',
    "inputs of the wrong type": b'{"inputs": 5}',
    "inputs holding null": b'{"inputs": [null]}',
    "config of the wrong type": b'{"input": {}, "config": 7}',
}
"""Malformed request bodies sent as ``application/json`` to every route of every workflow."""


DOC_ID = "0123456789abcdef"
"""A document id no document has."""


def html_page(size: int) -> bytes:
    """An ordinary page of ``size`` bytes: paragraphs with a little inline markup."""
    para = b"<p>The pump station serves the <b>eastern</b> district and its <i>three</i> reservoirs.</p>\n"
    return b"<html><head><title>Pumps</title></head><body>" + para * (size // len(para)) + b"</body></html>"


def _timed_request(client: Any, route: str, body: dict[str, Any]) -> tuple[Any, float, float]:
    """The reply to ``body``, its seconds and the resident memory (MB) the process gained while it was answered.

    The body is written as JSON bytes first, so the memory is the server's (the client runs in the same process).
    """
    import gc

    raw = json.dumps(body).encode()
    gc.collect()
    with MemorySampler(every=0.01) as memory:
        began = time.perf_counter()
        reply = client.post(route, content=raw, headers={"content-type": "application/json"})
        seconds = time.perf_counter() - began
    return reply, round(seconds, 2), memory.figures()["growth"]


def _home_files(home: Path) -> dict[str, bytes]:
    """Every file of the data home and its bytes (the lock files aside: taking a lock leaves its empty file)."""
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def _checkpoint_rows(home: Path) -> int:
    """Rows of the checkpoint database (checkpoints and pending writes), 0 when there is none."""
    import sqlite3

    path = home / "checkpoints.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return sum(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("checkpoints", "writes"))


def _html_cases(client: Any, html_bytes: int) -> list[dict[str, Any]]:
    """An ordinary page of ``html_bytes`` and 213 KB of nested tags uploaded: a 413 in bounded time and memory."""
    rows = []
    for case, data, bound in (
        (f"{html_bytes / 1e6:.0f} MB HTML page", html_page(html_bytes), HTML_SECONDS),
        ("213 KB of nested tags", b"<div><p>x</p>" * 16_400, NESTED_SECONDS),  # each level a paragraph deeper
    ):
        reply, seconds, rise = _timed_request(client, "/ingest/invoke", _upload(data, "page.html"))
        held = reply.status_code == 413 and seconds <= bound and rise <= HTML_RSS_MB
        rows.append(
            {
                "case": case,
                "held": held,
                "status": reply.status_code,
                "seconds": seconds,
                "rss_rise_mb": rise,
                "message": str(reply.json()["detail"] if "json" in reply.headers["content-type"] else reply.text)[:200],
            }
        )
    return rows


def _stored_nothing(client: Any, home: Path, repeats: int) -> list[dict[str, Any]]:
    """Inputs each workflow refuses, sent with a document's text: nothing of it stored, on a thread or not."""
    text = "# Heron\n\nThe 3391-KESTREL-DUNE shelf holds the pumps.\n"
    refused = {
        "ask with a blank question": ("chain", {"question": "   ", "text": text}),
        "summarize with length -3": ("summarize", {"text": text, "length": -3}),
        "chat with a blank question": ("offload", {"question": "   ", "text": text}),
        "route with a blank request": ("route", {"request": "  ", "registry_data": [], "text": text}),
        f"doc_ids of one id {repeats:,} times": (
            "chain",
            {"question": QUESTION, "doc_ids": ["0123456789abcdef"] * repeats},
        ),
    }
    rows = []
    for case, (workflow, value) in refused.items():
        before, statuses = _home_files(home), []
        for route, body in (
            (f"/{workflow}/invoke", {"input": value}),
            (f"/{workflow}/stream", {"input": value}),
            (f"/{workflow}/batch", {"inputs": [value]}),
            (f"/{workflow}/invoke", {"input": value, "config": {"configurable": {"thread_id": "door"}}}),
        ):
            statuses.append(client.post(route, json=body).status_code)
        after = _home_files(home)
        changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k) and not k.startswith("locks/"))
        held = all(400 <= code < 500 for code in statuses) and not changed
        rows.append({"case": case, "held": held, "statuses": statuses, "changed": changed[:5]})
    many = {"inputs": [{"requests": ["plot sales"] * 100, "registry": "r", "registry_data": []}] * 100}
    reply = client.post("/route/batch", json=many)
    rows.append(
        {
            "case": "a route batch of 100 x 100 requests",
            "held": reply.status_code == 413,
            "statuses": [reply.status_code],
        }
    )
    return rows


def _stateless(client: Any, home: Path, doc_id: str) -> dict[str, Any]:
    """Requests without a thread id on every workflow and route: the checkpoint database does not grow."""
    inputs = {
        "summarize": {"doc_id": doc_id, "length": 40},
        "offload": {"question": QUESTION, "doc_id": doc_id},
        "route": {"request": "plot sales", "registry": "door", "registry_data": ROUTE_REGISTRY},
    }
    before, statuses = _checkpoint_rows(home), []
    for workflow, value in inputs.items():
        for kind in ("invoke", "stream", "batch", "stream_log", "stream_events"):
            body = {"inputs": [value, value]} if kind == "batch" else {"input": value}
            statuses.append(client.post(f"/{workflow}/{kind}", json=body).status_code)
    grown = _checkpoint_rows(home) - before
    return {
        "case": "stateless requests leave no checkpoint",
        "held": grown == 0 and all(code == 200 for code in statuses),
        "statuses": sorted(set(statuses)),
        "checkpoint_rows_added": grown,
    }


ROUTE_REGISTRY = [{"name": "sales", "description": "sales charts", "tools": [{"name": "plot", "description": "plot"}]}]


def _malformed(client: Any) -> dict[str, Any]:
    """Every malformed body on every route of every workflow (and ``/forget``): a 4xx with a reason."""
    unclear = []
    tried = 0
    routes = [f"/{w}/{k}" for w in ROUTE_NAMES for k in ("invoke", "batch", "stream", "stream_log", "stream_events")]
    for route in [*routes, "/forget"]:
        for name, raw in BAD_BODIES.items():
            reply = client.post(route, content=raw, headers={"content-type": "application/json"})
            tried += 1
            detail = reply.json().get("detail") if "json" in reply.headers.get("content-type", "") else None
            if not (400 <= reply.status_code < 500 and detail):
                unclear.append(f"{route} {name}: {reply.status_code}")
    return {"case": "malformed bodies on every route", "held": not unclear, "tried": tried, "unclear": unclear[:10]}


ROUTE_NAMES = ("ingest", "chain", "summarize", "offload", "route")


def door(html_bytes: int = 14_000_000, repeats: int = 1_000_000) -> dict[str, Any]:
    """What the LangServe app's door holds (:func:`html_page` of ``html_bytes``, ``doc_ids`` of ``repeats`` ids).

    Held when: an ordinary HTML page of 14 MB and a page of 213 KB of nested tags are refused (413) within
    :data:`HTML_SECONDS` / :data:`NESTED_SECONDS` adding at most :data:`HTML_RSS_MB` of resident memory; every
    workflow's refused input (a blank question or request, a negative length, ``doc_ids`` of a million ids) leaves
    every file of the data home as it was, on a thread or not; a route batch of 100 x 100 requests is a 413;
    requests without a thread id leave no checkpoint; every malformed body on every route is a 4xx with a reason.
    """
    from doubles.replies import offload_chat_model

    home = Path(os.environ["LONGDOC_HOME"])
    with _client(offload_chat_model(), raise_server_exceptions=False) as client:  # a 500 is a case that failed
        rows = _html_cases(client, html_bytes)
        doc_id = _ingest(client)
        rows += _stored_nothing(client, home, repeats)
        rows.append(_stateless(client, home, doc_id))
        rows.append(_malformed(client))
    return {"cases": len(rows), "held": sum(r["held"] for r in rows), "rows": rows}


# --- tenants: sessions and concurrent turns ----------------------------------------------------------
def tenants() -> dict[str, Any]:
    """Two tenants sharing a namespace, and two turns at once on one thread, over LangServe.

    Held when: a tenant naming another's chat session is refused (400) and the other's stored turn stays as it
    was; the same thread name is each tenant's own session; another tenant's ``forget`` of the thread is a 404
    and leaves it; of two turns sent at once on one thread one runs (turn 2) and the other is a 409, the next
    turn is 3 and each turn's exchange is stored once."""
    import threading

    from doubles.replies import offload_chat_model
    from stores.offload import get_offload_store
    from surfaces.access import thread_key

    shared = {"namespaces": ["shared"]}
    keys = {"b": {"key": "b-key", **shared}, "c": {"key": "c-key", **shared}}
    b, c = {"X-API-Key": "b-key"}, {"X-API-Key": "c-key"}
    rows: list[dict[str, Any]] = []
    with _server_keys(keys), _client(offload_chat_model(delay=0.2)) as client:
        body = {"input": {"text": FALCON.read_text(encoding="utf-8")}}
        doc_id = client.post("/ingest/invoke", json=body, headers=b).json()["output"]["doc_id"]

        def turn(headers: dict[str, str], thread: str, question: str, **extra: Any) -> Any:
            payload = {"input": {"question": question, "doc_id": doc_id, **extra}}
            return client.post(
                "/offload/invoke", json={**payload, "config": {"configurable": {"thread_id": thread}}}, headers=headers
            )

        first = turn(b, "bchat", QUESTION)
        session = thread_key("b", "bchat")
        store = get_offload_store("shared")
        stored = [i.text for i in store.list(session)]
        taken = turn(c, "c1", "What is the launch code?", session=session)
        rows.append({"case": "another tenant's session is refused", "held": taken.status_code == 400})
        foreign = client.post("/forget", json={"thread_id": "bchat"}, headers=c)
        rows.append(
            {
                "case": "another tenant's forget is a 404",
                "held": foreign.status_code == 404 and [i.text for i in store.list(session)] == stored,
            }
        )
        own = turn(c, "bchat", "What is the launch code?")
        rows.append(
            {
                "case": "a thread name is each tenant's own session",
                "held": first.status_code == own.status_code == 200
                and own.json()["output"]["session"] != session
                and [i.text for i in store.list(session)] == stored,
            }
        )
        replies: list[Any] = []
        racing = [
            threading.Thread(target=lambda q=q: replies.append(turn(b, "bchat", q))) for q in ("Who buys?", "Who pays?")
        ]
        for thread in racing:
            thread.start()
        for thread in racing:
            thread.join()
        statuses = sorted(r.status_code for r in replies)
        won = [r.json()["output"] for r in replies if r.status_code == 200]
        third = turn(b, "bchat", "When do the trials start?")
        exchanges = [i.id for i in store.list(session) if i.role == "exchange"]
        rows.append(
            {
                "case": "two turns at once on one thread: one runs, one is a 409",
                "held": statuses == [200, 409]
                and won[0]["turn"] == 2
                and third.status_code == 200
                and third.json()["output"]["turn"] == 3
                and exchanges == ["o1", "o2", "o3"],
                "statuses": statuses,
            }
        )
    return {"cases": len(rows), "held": sum(r["held"] for r in rows), "rows": rows}


@contextlib.contextmanager
def _server_keys(keys: dict[str, Any]) -> Iterator[None]:
    """``LONGDOC_SERVER_KEYS`` set to ``keys`` while the block runs."""
    saved = os.environ.get("LONGDOC_SERVER_KEYS")
    os.environ["LONGDOC_SERVER_KEYS"] = json.dumps(keys)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("LONGDOC_SERVER_KEYS", None)
        else:
            os.environ["LONGDOC_SERVER_KEYS"] = saved


# --- caller budgets and token bounds -------------------------------------------------------------------
BLOB_BOUND_CHARS = 16_000
"""Most characters a model request of the blob runs may carry (the workflows' budgets are a few thousand tokens)."""


def budgets() -> dict[str, Any]:
    """What a caller may ask of the server, and what text without spaces makes of a prompt.

    Every bounded setting of every workflow sent at ten times its top (``refused``: 400 before any run), a route
    of 60,000 requests and a 100,000-character thread id (400, ``slowest_refusal_seconds``); then a base64
    blob, a hex dump and a run of one letter, each about 100,000 characters, asked about, summarized and
    chatted over through the scripted endpoint: ``oversized_requests`` counts the model requests over
    :data:`BLOB_BOUND_CHARS` characters or asking for more than 4,000 tokens, ``largest_request_chars`` the
    largest."""
    import hashlib

    from doubles import endpoint as fake_endpoint
    from stores.endpoints import endpoint_gate
    from surfaces.access import CALLER_BOUNDS, served_fields

    rows = []
    with _client() as client:
        for workflow in ("ingest", "chain", "summarize", "offload", "route"):
            for key in sorted(served_fields(workflow) & set(CALLER_BOUNDS)):
                high = CALLER_BOUNDS[key][1]
                value = int(high * 10 + 1) if float(high).is_integer() else high * 10 + 1
                config = {"configurable": {key: value}}
                reply = client.post(f"/{workflow}/invoke", json={"input": {"text": "x"}, "config": config})
                rows.append({"case": f"{workflow}.{key}={value}", "status": reply.status_code})
        for case, route, body in (
            ("60,000 route requests", "/route/invoke", {"input": {"requests": ["plot sales"] * 60_000}}),
            (
                "100,000-character thread id",
                "/ingest/invoke",
                {"input": {"text": "x"}, "config": {"configurable": {"thread_id": "t" * 100_000}}},
            ),
        ):
            started = time.monotonic()
            reply = client.post(route, json=body)
            rows.append({"case": case, "status": reply.status_code, "seconds": round(time.monotonic() - started, 2)})
    raw = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2400))
    blobs = {"base64": base64.b64encode(raw).decode(), "hex": raw.hex()[:100_000], "one letter": "x" * 100_000}
    script = fake_endpoint.Script()
    largest, oversized, calls = 0, 0, 0
    os.environ.update(LONGDOC_MODEL="scripted", LONGDOC_MAX_RETRIES="0")
    try:
        with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
            os.environ["LONGDOC_BASE_URL"] = url + "/v1"
            with _client() as client:
                for blob in blobs.values():
                    doc_id = client.post("/ingest/invoke", json={"input": {"text": blob}}).json()["output"]["doc_id"]
                    for route, body in (
                        ("/chain/invoke", {"question": "What does it say?", "doc_id": doc_id}),
                        ("/summarize/invoke", {"doc_id": doc_id, "length": 40}),
                        ("/offload/invoke", {"question": "What does it say?", "doc_id": doc_id}),
                    ):
                        endpoint_gate.reset()
                        client.post(route, json={"input": body})
            for request in script.requests:
                if not request["path"].endswith("/chat/completions"):
                    continue
                calls += 1
                chars = sum(len(str(m.get("content") or "")) for m in request["body"].get("messages", []))
                asked = int(request["body"].get("max_tokens") or request["body"].get("max_completion_tokens") or 0)
                largest = max(largest, chars)
                oversized += chars > BLOB_BOUND_CHARS or asked > 4000
    finally:
        for key in ("LONGDOC_BASE_URL", "LONGDOC_MAX_RETRIES"):
            os.environ.pop(key, None)
    return {
        "settings_tried": len(rows),
        "refused": sum(r["status"] == 400 for r in rows),
        "slowest_refusal_seconds": max(r.get("seconds", 0) for r in rows),
        "blob_requests": calls,
        "largest_request_chars": largest,
        "oversized_requests": oversized,
        "rows": rows,
    }


# --- work bounded before it starts --------------------------------------------------------------------------
BOUND_DOCUMENTS = 53
"""Documents of the namespace summarized whole with map-reduce (a few chunks each: over 200 chunks in all)."""
FOLDER_FILES = 12_000
"""Small files of the folder ingested (over the 10,000 of ``LONGDOC_MAX_DOCUMENTS``)."""
LATE_CALL_SECONDS = 5.0
"""Longest a model call may start after its client left."""


class _TimedCalls:
    """A scripted summarize reply that waits ``delay`` seconds per call, holding call ``hold`` until released, and
    records when each call started."""

    def __init__(self, delay: float = 0.0, hold: int = 0) -> None:
        import threading

        self.delay, self.hold = delay, hold
        self.starts: list[float] = []
        self.lock, self.held, self.release = threading.Lock(), threading.Event(), threading.Event()

    def __call__(self, messages: Any) -> str:
        from doubles.replies import summarize_reply

        with self.lock:
            self.starts.append(time.monotonic())
            mine = len(self.starts)
        if mine == self.hold:
            self.held.set()
            self.release.wait(30)
        time.sleep(self.delay)
        return summarize_reply(messages)


def _whole_namespace_calls(folder: Path) -> dict[str, Any]:
    """Map-reduce over a namespace of :data:`BOUND_DOCUMENTS` documents, and an expert-editor run bounded at 4
    calls: the status, its message and the model calls each made."""
    from nodes.ingest import ingest

    namespace = "bounds"
    for i in range(BOUND_DOCUMENTS):
        lines = " ".join(f"Station {i} logged {j} readings of well {j} on day {i + j}." for j in range(30))
        ingest(text=f"# Station {i}\n\n{lines}\n", namespace=namespace, chunk_size=120, chunk_overlap=20)
    config = {"configurable": {"namespace": namespace, "chunk_size": 120, "chunk_overlap": 20}}
    rows = []
    for case, method, bound in (("map-reduce over the whole namespace", "map-reduce", ""), ("bounded run", "", "4")):
        calls = _TimedCalls()
        if bound:
            os.environ["LONGDOC_MAX_MODEL_CALLS"] = bound
        try:
            with _client(ScriptedChatModel(default=calls)) as client:
                body = {"whole_namespace": True, **({"method": method} if method else {})}
                started = time.monotonic()
                reply = client.post("/summarize/invoke", json={"input": body, "config": config})
        finally:
            os.environ.pop("LONGDOC_MAX_MODEL_CALLS", None)
        detail = str(reply.json().get("detail", "")) if reply.status_code != 200 else ""
        rows.append(
            {
                "case": case,
                "status": reply.status_code,
                "calls": len(calls.starts),
                "bound": int(bound or 200),
                "seconds": round(time.monotonic() - started, 2),
                "names_the_bound": "LONGDOC_MAX_MODEL_CALLS" in detail,
                "message": detail[:300],
            }
        )
    return {"documents": BOUND_DOCUMENTS, "rows": rows}


def _left_mid_run(observe: float = 8.0) -> dict[str, Any]:
    """A refine summary over LangServe whose client leaves at its third model call (each call 0.3 s): the calls
    started after the client left and when the last of them started."""
    import socket
    from urllib.parse import urlsplit

    from doubles import endpoint as fake_endpoint
    from surfaces.serve import create_app

    calls = _TimedCalls(delay=0.3, hold=3)
    text = "# Wells\n\n" + "\n\n".join(
        f"## Well {i}\n\nWell {i} near Nakuru gave {i} litres on day {i}. Team {i} checked its pump." for i in range(60)
    )
    chunking = {"chunk_size": 60, "chunk_overlap": 10}
    body = json.dumps({"input": {"text": text, "method": "refine"}, "config": {"configurable": chunking}})
    with fake_endpoint.running(create_app(chat_model=ScriptedChatModel(default=calls))) as url:
        host = urlsplit(url)
        client = socket.create_connection((host.hostname, host.port))
        head = f"POST /summarize/invoke HTTP/1.1\r\nHost: {host.netloc}\r\nContent-Type: application/json\r\n"
        client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode())
        reached = calls.held.wait(60)
        client.close()
        left = time.monotonic()
        calls.release.set()
        time.sleep(observe)
    later = [start - left for start in calls.starts if start > left]
    return {
        "reached_the_third_call": reached,
        "calls_before_leaving": sum(start <= left for start in calls.starts),
        "calls_started_after_leaving": len(later),
        "last_call_start_after_leaving_s": round(max(later), 2) if later else 0.0,
        "observed_s": observe,
    }


def _large_folder(folder: Path, timeout: float = 60) -> dict[str, Any]:
    """``longdoc ingest`` of a folder of :data:`FOLDER_FILES` small files (cut at ``timeout`` seconds): its exit
    code, seconds, message and the documents left behind."""
    import subprocess

    from stores.documents import list_documents

    root = folder / "many"
    root.mkdir(parents=True, exist_ok=True)
    for i in range(FOLDER_FILES):
        (root / f"note{i:05d}.md").write_text(f"# Note {i}\n\nWell {i} gave {i} litres.\n", encoding="utf-8")
    env = {**os.environ, "LONGDOC_EMBEDDER": "hash", "PYTHONPATH": str(ROOT)}
    proc = _process(env, ["ingest", str(root), "--namespace", "folder"])
    started = time.monotonic()
    try:
        _out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        code = None
    seconds = time.monotonic() - started
    return {
        "files": FOLDER_FILES,
        "code": code,
        "seconds": round(seconds, 2),
        "names_the_limit": "LONGDOC_MAX_DOCUMENTS" in err,
        "message": err.strip().splitlines()[-1][:300] if err.strip() else "",
        "documents_left": len(list_documents("folder")),
    }


def work_bounds(folder: Path) -> dict[str, Any]:
    """A request's work is bounded and known before it starts.

    ``calls``: map-reduce over a namespace of 53 documents (over 200 chunks) refused (413) before its first model
    call, naming ``LONGDOC_MAX_MODEL_CALLS``, and a run bounded at 4 calls making at most 4; ``disconnect``: a
    served run whose client leaves mid-run starts no model call more than :data:`LATE_CALL_SECONDS` later
    (``last_call_start_after_leaving_s``); ``folder``: ``longdoc ingest`` of 12,000 small files refused (exit 2)
    within 10 s, naming ``LONGDOC_MAX_DOCUMENTS``, with no document left behind.
    """
    return {"calls": _whole_namespace_calls(folder), "disconnect": _left_mid_run(), "folder": _large_folder(folder)}


# --- the dev server's origin policy ---------------------------------------------------------------------
STUDIO = "https://smith.langchain.com"
FOREIGN = "https://evil.example"


def dev_server(folder: Path, timeout: float = 180) -> dict[str, Any]:
    """``langgraph dev`` as ``make dev`` runs it (``langgraph.json`` as committed, in a copy of the project), with
    ``LONGDOC_INGEST_ROOT`` set, the operator's key and model on the scripted endpoint and a second scripted
    endpoint standing for a URL an attacker chooses.

    Held when: a foreign origin's preflight is refused without CORS or private-network headers and its "simple"
    POST (no preflight) runs nothing; a DNS-rebound host is refused; Studio's preflight is allowed; a run or an
    assistant setting the endpoint or model is refused; a file outside the ingest root is refused as a run's
    input and as an MCP ``ingest``; one inside it is read; no request ever reaches the attacker's endpoint."""
    import shutil
    import subprocess

    import httpx

    from doubles import endpoint as fake_endpoint

    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if exe is None:
        return {"cases": 0, "held": 0, "error": "the langgraph CLI is not installed (make install)"}
    work, docs = folder / "dev-project", folder / "dev-docs"
    ignore = shutil.ignore_patterns(".venv", ".git", "node_modules", ".langgraph_api", "*.pyc", ".*_cache", "results")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT, work, ignore=ignore)
    docs.mkdir(exist_ok=True)
    (docs / "falcon.md").write_text(FALCON.read_text(encoding="utf-8"), encoding="utf-8")
    attacker, operator = fake_endpoint.Script(), fake_endpoint.Script()
    rows: list[dict[str, Any]] = []
    readme = str(ROOT / "README.md")
    with (
        fake_endpoint.running(fake_endpoint.create_app(attacker)) as evil,
        fake_endpoint.running(fake_endpoint.create_app(operator)) as model,
    ):
        port = fake_endpoint.free_port()
        env = {
            **os.environ,
            "LONGDOC_HOME": str(folder / "dev-home"),
            "LONGDOC_BASE_URL": f"{model}/v1",
            "LONGDOC_MODEL": "scripted",
            "LONGDOC_API_KEY": "operator-secret-key",
            "LONGDOC_INGEST_ROOT": str(docs),
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
        }
        log = (folder / "dev.log").open("wb")
        args = [exe, "dev", "--port", str(port), "--no-browser", "--no-reload"]
        proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            from deploy.cluster import wait_until

            wait_until(f"{url}/ok", timeout, proc)
            with httpx.Client(base_url=url, timeout=60) as http:
                preflight = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
                foreign = http.options("/runs/wait", headers={"origin": FOREIGN, **preflight})
                rows.append(
                    {
                        "case": "a foreign origin's preflight",
                        "held": foreign.status_code == 403
                        and not {"access-control-allow-origin", "access-control-allow-private-network"}
                        & set(foreign.headers),
                    }
                )
                steal = {"assistant_id": "ingest", "input": {"path": readme}, "context": {"base_url": f"{evil}/v1"}}
                simple = http.post(
                    "/runs/wait", content=json.dumps(steal), headers={"origin": FOREIGN, "content-type": "text/plain"}
                )
                rows.append({"case": "a foreign origin's simple POST", "held": simple.status_code == 403})
                rebound = http.get("/threads/search", headers={"host": f"evil.example:{port}"})
                rows.append({"case": "a DNS-rebound host", "held": rebound.status_code == 403})
                studio = http.options("/runs/wait", headers={"origin": STUDIO, **preflight})
                rows.append(
                    {
                        "case": "Studio's preflight",
                        "held": studio.status_code == 200
                        and studio.headers.get("access-control-allow-origin") == STUDIO
                        and studio.headers.get("access-control-allow-private-network") == "true",
                    }
                )
                chat = {"assistant_id": "offload", "input": {"question": "What is it?", "text": "Herons wade."}}
                moved = http.post("/runs/wait", json={**chat, "context": {"base_url": f"{evil}/v1"}})
                rows.append({"case": "a run setting the endpoint", "held": moved.status_code == 400})
                assistant = http.post("/assistants", json={"graph_id": "offload", "context": {"model": "other"}})
                rows.append({"case": "an assistant setting the model", "held": assistant.status_code == 400})
                outside = http.post("/runs/wait", json={"assistant_id": "ingest", "input": {"path": readme}})
                rows.append({"case": "a run reading a file outside the root", "held": outside.status_code == 400})
                mcp = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
                escaped = http.post(
                    "/mcp", headers=mcp, json={**call, "params": {"name": "ingest", "arguments": {"path": readme}}}
                )
                result = escaped.json().get("result", {}) if escaped.status_code == 200 else {}
                rows.append({"case": "an MCP ingest outside the root", "held": bool(result.get("isError"))})
                inside = http.post(
                    "/runs/wait",
                    json={"assistant_id": "ingest", "input": {"path": "falcon.md"}},
                    headers={"origin": STUDIO},
                )
                rows.append({"case": "a run reading a file inside the root", "held": inside.status_code == 200})
        finally:
            from deploy.cluster import stop

            stop(proc)
            log.close()
    rows.append({"case": "no request reached the attacker's endpoint", "held": not attacker.requests})
    shutil.rmtree(work, ignore_errors=True)
    return {"cases": len(rows), "held": sum(r["held"] for r in rows), "rows": rows}


# --- concurrency ----------------------------------------------------------------------------------
def concurrency(requests: int) -> dict[str, Any]:
    """Concurrent ingests of one text and chat turns on their own threads, through the LangServe app."""
    from doubles.replies import offload_chat_model as fake_chat_model

    text = FALCON.read_text(encoding="utf-8")
    latencies: list[float] = []
    errors: list[str] = []
    with _client(fake_chat_model()) as client:
        doc_id = _ingest(client)

        def one(i: int) -> None:
            if i % 2:
                body: dict[str, Any] = {"input": {"text": text + f"\n\nCopy {i % 4}."}}
                route = "/ingest/invoke"
            else:
                body = {"input": {"question": QUESTION, "doc_id": doc_id}}
                body["config"] = {"configurable": {"thread_id": f"load-{i}"}}
                route = "/offload/invoke"
            start = time.perf_counter()
            response = client.post(route, json=body)
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                errors.append(f"{route} {response.status_code}")

        with ThreadPoolExecutor(max_workers=min(32, requests)) as pool:
            list(pool.map(one, range(requests)))
    ordered = sorted(latencies)
    return {
        "requests": requests,
        "errors": len(errors),
        "error_samples": errors[:5],
        "p50_s": round(statistics.median(ordered), 3),
        "p95_s": round(ordered[max(0, math.ceil(len(ordered) * 0.95) - 1)], 3),  # nearest rank
    }


# --- index integrity and retention ---------------------------------------------------------------
RECHUNK_SIZES = (900, 300, 600, 900, 300, 600)


def _index_kills(document: Path) -> list[dict[str, Any]]:
    """A re-index at chunk size 300 of a document indexed at 900, its process killed with SIGKILL at each
    point of :data:`doubles.index_checks.KILL_POINTS` (half-way through its first or second batch of chunks,
    just before its record is written, just after); then the same ingest again."""
    from doubles.index_checks import KILL_POINTS, kill_reindex
    from nodes.ingest import index_state, ingest
    from stores.vectorstore import reset_stores

    text = document.read_text(encoding="utf-8")
    rows = []
    for point in KILL_POINTS:
        namespace = f"index-killed-{point}"
        doc_id = ingest(text=text, namespace=namespace, chunk_size=900).doc_id
        code = kill_reindex(document, namespace, 300, point)
        reset_stores()  # read what the killed process left, not a cached view
        left = index_state(namespace, doc_id)
        again = ingest(text=text, namespace=namespace, chunk_size=300)
        after = index_state(namespace, doc_id)
        rows.append(
            {
                "point": point,
                "killed": code == -signal.SIGKILL,
                "whole_after_kill": left["whole"] and left["chunk_size"] == (300 if point == "cleanup" else 900),
                "clean_after_next_ingest": again.doc_id == doc_id and after["clean"] and after["chunk_size"] == 300,
            }
        )
    return rows


def index_integrity(folder: Path, rounds: int, seed: int = 13) -> dict[str, Any]:
    """Six concurrent re-chunks of one document over HTTP (``configurable.chunk_size`` 900, 300, 600) per
    round, then re-indexes killed half-way: ``consistent`` rounds end with one whole index (record, visible
    and stored chunks agree); a killed re-index leaves a whole index in use and the next ingest a clean one."""
    from nodes.ingest import index_state

    document = _large_document(folder, sections=20, seed=seed)
    text = document.read_text(encoding="utf-8")
    rows = []
    with _client() as client:
        for r in range(rounds):
            body = {"input": {"text": f"{text}\nRound {r}.\n", "namespace": "rechunk"}}

            def one(size: int, body: dict[str, Any] = body) -> Any:
                return client.post("/ingest/invoke", json={**body, "config": {"configurable": {"chunk_size": size}}})

            with ThreadPoolExecutor(max_workers=len(RECHUNK_SIZES)) as pool:
                replies = list(pool.map(one, RECHUNK_SIZES))
            ok = [reply.json()["output"]["doc_id"] for reply in replies if reply.status_code == 200]
            state = index_state("rechunk", ok[0]) if ok else {"clean": False}
            rows.append({"round": r, "ok": len(ok), "consistent": len(ok) == len(RECHUNK_SIZES) and state["clean"]})
    killed = _index_kills(document)
    return {
        "rechunk_rounds": rounds,
        "consistent_rounds": sum(row["consistent"] for row in rows),
        "kills": sum(row["killed"] for row in killed),
        "whole_after_kill": sum(row["whole_after_kill"] for row in killed if row["killed"]),
        "clean_after_next_ingest": sum(row["clean_after_next_ingest"] for row in killed if row["killed"]),
        "rounds": rows,
        "runs": killed,
    }


def live_copies(home: Path, needle: str, only: Callable[[Path], bool] | None = None) -> list[str]:
    """Files under ``home`` whose bytes hold ``needle``, read as a running server leaves them: the databases and
    their write-ahead logs (Chroma's SQLite file included), documents and caches; nothing is checkpointed first.
    Chroma's vector index files are left out (they hold vectors, and stray bytes of its process's memory:
    docs/security.md, "What forget removes")."""
    from surfaces.retention import is_vector_index_file

    found = []
    for path in sorted(home.rglob("*")):
        if not path.is_file() or is_vector_index_file(path, home) or (only is not None and not only(path)):
            continue
        with contextlib.suppress(OSError):
            if needle.encode() in path.read_bytes():
                found.append(str(path.relative_to(home)))
    return found


def _checkpoint_files(path: Path) -> bool:
    return path.name.startswith("checkpoints.sqlite")


def retention(folder: Path) -> dict[str, Any]:
    """What stays of a caller's data, searched in the live files as the running server leaves them (no checkpoint
    of SQLite's write-ahead log first; Chroma's SQLite file included).

    Over HTTP: an upload, a chat naming its document by ``text``, a question refused before its run and one
    refused by the run after its first checkpoint; ``leaks`` counts the checkpoint files (database, log) holding
    any of them. Then ``POST /forget`` of a chat thread and of a document, and ``forget`` of the namespace:
    ``left_after_forget`` counts the files still holding the thread's question or the document's text, and what
    remains of the namespace (checkpoint rows, collections, files)."""
    from doubles.checkpoint_checks import thread_rows
    from doubles.replies import offload_chat_model
    from stores.vectorstore import namespace_collections
    from surfaces.retention import forget_namespace

    home = Path(os.environ["LONGDOC_HOME"])
    text = _large_document(folder, sections=8, seed=17).read_text(encoding="utf-8")
    upload = "# Ledger\n\nLedger entry 4417-HERON-MAPLE closes the account.\n"
    data = base64.b64encode(upload.encode()).decode()
    huge = "why " * 1500
    late = "Where is the 2288-WREN-CEDAR kept?"
    namespace = "retention"
    with _client(offload_chat_model()) as client:

        def chat(body: dict[str, Any], thread: str) -> Any:
            config = {"configurable": {"thread_id": thread}}
            return client.post("/offload/invoke", json={"input": {"namespace": namespace, **body}, "config": config})

        codes = [
            client.post(
                "/ingest/invoke", json={"input": {"data": data, "filename": "ledger.md", "namespace": namespace}}
            ),
            chat({"question": QUESTION, "text": text}, "kept-chat"),
        ]
        refused = [
            chat({"question": huge, "text": text}, "refused"),  # at the door
            chat({"question": late, "doc_id": "0123456789abcdef"}, "refused-late"),  # by the run, checkpointed
        ]
        kept = thread_rows(home, "kept-chat")
        leaks = (
            sum(
                len(live_copies(home, needle, _checkpoint_files))
                for needle in ("4417-HERON-MAPLE", data[:40], text[:6000], "why why why", "2288-WREN")
            )
            + thread_rows(home, "refused")
            + thread_rows(home, "refused-late")
        )
        # A thread and a document forgotten over HTTP leave no copy anywhere.
        secret = "Where is the 5510-IBIS-SLATE valve?"
        other = {"text": upload.replace("4417-HERON", "8830-RAIL"), "namespace": namespace}
        doc_id = client.post("/ingest/invoke", json={"input": other}).json()["output"]["doc_id"]
        codes.append(chat({"question": secret, "doc_id": doc_id}, "forget-me"))
        forgotten = [
            client.post("/forget", json={"thread_id": "forget-me"}),
            client.post("/forget", json={"doc_id": doc_id, "namespace": namespace}),
        ]
        missing = client.post("/forget", json={"thread_id": "forget-me"})
    left = len(live_copies(home, "5510-IBIS")) + len(live_copies(home, "8830-RAIL"))
    forget_namespace(namespace)
    left += thread_rows(home, "kept-chat") + len(namespace_collections(namespace))
    left += (
        sum(1 for _ in (home / "namespaces" / namespace).rglob("*"))
        if (home / "namespaces" / namespace).exists()
        else 0
    )
    left += len(live_copies(home, "4417-HERON-MAPLE"))
    return {
        "requests_ok": sum(reply.status_code == 200 for reply in codes),
        "refused_status": [reply.status_code for reply in refused],
        "forget_status": [reply.status_code for reply in forgotten] + [missing.status_code],
        "leaks": leaks,
        "checkpointed_rows": kept,
        "left_after_forget": left,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The suites asked for (every one by default), in a scratch data folder."""
    suites: dict[str, Callable[[Path], dict[str, Any]]] = {
        "faults": lambda _tmp: faults(),
        "interruptions": lambda _tmp: interruptions(args.interruptions),
        "kills": lambda tmp: kills(args.kills, tmp),
        "bad_inputs": bad_inputs,
        "concurrency": lambda _tmp: concurrency(args.concurrency),
        "index": lambda tmp: index_integrity(tmp, args.rechunk_rounds),
        "retention": retention,
        "tenants": lambda _tmp: tenants(),
        "budgets": lambda _tmp: budgets(),
        "dev_server": dev_server,
        "work_bounds": work_bounds,
        "door": lambda _tmp: door(),
        "leave": leave,
        "owners": owners,
        "door_limits": door_limits,
    }
    wanted = chosen(args.suites, suites, "suites") if getattr(args, "suites", "") else list(suites)
    report: dict[str, Any] = {}
    with scratch_home() as tmp:
        started = time.perf_counter()
        for name in wanted:
            with MemorySampler() as memory:
                begun = time.perf_counter()
                report[name] = suites[name](tmp)
            report[name]["seconds"] = round(time.perf_counter() - begun, 1)
            report[name]["memory_mb"] = memory.figures()
        report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def rss_mb() -> float:
    """This process's resident set size now (MB), read from ``/proc`` (0 where there is none)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class MemorySampler:
    """The process's resident memory while a suite runs, sampled every ``every`` seconds on a thread of its own:
    at its start and its peak (``resource``'s ``ru_maxrss`` is the process's lifetime peak, the same for every
    suite after the largest one)."""

    def __init__(self, every: float = 0.1) -> None:
        import threading

        self.every = every
        self.start = self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> MemorySampler:
        self.start = self.peak = rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())

    def figures(self) -> dict[str, float]:
        """Resident MB at the suite's start and at its peak, and the growth between them."""
        start, peak = round(self.start, 1), round(self.peak, 1)
        return {"start": start, "peak": peak, "growth": round(peak - start, 1)}  # the growth the printed figures show


def failures(report: dict[str, Any]) -> list[str]:
    """What in ``report`` falls short of the guarantees (empty when every suite held)."""
    return [
        *_run_failures(report),
        *_input_failures(report),
        *_service_failures(report),
        *_bound_failures(report.get("work_bounds", {})),
        *leave_failures(report.get("leave", {})),
        *owners_failures(report.get("owners", {})),
    ]


def _run_failures(report: dict[str, Any]) -> list[str]:
    """What in the faults, interruptions and kills suites of ``report`` falls short."""
    found = []
    faults_part = report.get("faults", {})
    interrupted, killed = report.get("interruptions", {}), report.get("kills", {})
    if faults_part.get("survived", 0) < faults_part.get("injected", 0):
        found.append(f"faults: {faults_part['injected'] - faults_part['survived']} runs did not survive")
    if faults_part.get("clear_errors", 0) < faults_part.get("failed_runs", 0):
        found.append("faults: a failed run's message does not name the model step")
    if faults_part.get("streams_ended_with_an_error_event", 0) < faults_part.get("failing_streams", 0):
        found.append("faults: a failing stream did not end with an error event and a whole body")
    busy = faults_part.get("busy_bundled", [])
    if faults_part.get("busy_bundled_held", 0) < len(busy):
        found.append(f"faults: busy bundled server cases did not hold: {[r['case'] for r in busy if not r['held']]}")
    for name, part, count in (("interruptions", interrupted, "interruptions"), ("kills", killed, "kills")):
        if part.get("clean_resumes", 0) < part.get(count, 0):
            found.append(f"{name}: {part[count] - part.get('clean_resumes', 0)} runs did not resume cleanly")
        if part.get("repeated_calls", 0):
            found.append(f"{name}: {part['repeated_calls']} finished model calls were sent again")
    if killed.get("kills", 0) < len(killed.get("runs", [])):
        found.append(f"kills: {len(killed['runs']) - killed['kills']} processes finished before their kill came")
    return found


def _input_failures(report: dict[str, Any]) -> list[str]:
    """What in the bad inputs, concurrency and index suites of ``report`` falls short."""
    found = []
    bad = report.get("bad_inputs", {})
    if bad.get("clear_errors", 0) < bad.get("tried", 0):
        unclear = [
            f"{r['surface']} {r['case']} ({r['code']}: {r['message'][:200]})" for r in bad["cases"] if not r["clear"]
        ]
        found.append(f"bad inputs without a clear one-line error: {'; '.join(unclear)}")
    if report.get("concurrency", {}).get("errors", 0):
        found.append(f"concurrency: {report['concurrency']['errors']} requests failed")
    index = report.get("index", {})
    if index.get("consistent_rounds", 0) < index.get("rechunk_rounds", 0):
        found.append(
            f"index: {index['rechunk_rounds'] - index.get('consistent_rounds', 0)} re-chunk rounds left a mixed index"
        )
    for key in ("whole_after_kill", "clean_after_next_ingest"):
        if index.get(key, 0) < index.get("kills", 0):
            found.append(f"index: {index['kills'] - index.get(key, 0)} killed re-indexes not {key.replace('_', ' ')}")
    return found


def _service_failures(report: dict[str, Any]) -> list[str]:
    """What in the tenants, dev server, budgets and retention suites of ``report`` falls short."""
    found = []
    for name in ("tenants", "dev_server", "door", "door_limits"):
        part = report.get(name, {})
        if part and (part.get("held", 0) < part.get("cases", 0) or not part.get("cases")):
            short = [r["case"] for r in part.get("rows", []) if not r["held"]] or [part.get("error", "no case ran")]
            found.append(f"{name}: did not hold: {'; '.join(short)}")
    spent = report.get("budgets", {})
    if spent and (
        spent["refused"] < spent["settings_tried"]
        or spent["oversized_requests"]
        or spent["slowest_refusal_seconds"] > 5
    ):
        found.append(
            f"budgets: {spent['settings_tried'] - spent['refused']} settings past their bound taken, "
            f"{spent['oversized_requests']} oversized model requests"
        )
    kept = report.get("retention", {})
    if kept and (
        kept["leaks"]
        or kept["left_after_forget"]
        or kept["refused_status"] != [400, 400]
        or kept["requests_ok"] < 3
        or kept.get("forget_status") != [200, 200, 404]
    ):
        found.append(f"retention: {kept['leaks']} leaks, {kept['left_after_forget']} left after forget")
    return found


def _bound_failures(part: dict[str, Any]) -> list[str]:
    """What in the work bounds suite falls short: work not refused up front, calls past a bound or a departed
    client, a large folder not refused in time or leaving documents behind."""
    found = []
    for row in part.get("calls", {}).get("rows", []):
        refused = row["status"] == 413 and not row["calls"] and row["names_the_bound"]
        if row["case"].startswith("map-reduce") and not refused:
            found.append(f"work bounds: {row['case']} answered {row['status']} after {row['calls']} model calls")
        elif row["calls"] > row["bound"]:
            found.append(f"work bounds: {row['case']} made {row['calls']} model calls past its bound of {row['bound']}")
    left = part.get("disconnect", {})
    if left and (not left["reached_the_third_call"] or left["last_call_start_after_leaving_s"] > LATE_CALL_SECONDS):
        found.append(
            f"work bounds: {left['calls_started_after_leaving']} model calls started after the client left, "
            f"the last {left['last_call_start_after_leaving_s']} s later"
        )
    folder = part.get("folder", {})
    if folder and (folder["code"] != 2 or folder["seconds"] > 10 or folder["documents_left"]):
        found.append(
            f"work bounds: a folder of {folder['files']} files ended with code {folder['code']} after "
            f"{folder['seconds']} s, {folder['documents_left']} documents left behind"
        )
    return found


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="results JSON file")
    parser.add_argument("--interruptions", type=int, default=12, help="chat turns whose model dies at a random call")
    parser.add_argument(
        "--kills", type=int, default=8, help="chat, summarize, ask and ingest processes killed with SIGKILL mid-run"
    )
    parser.add_argument("--concurrency", type=int, default=40, help="concurrent requests")
    parser.add_argument("--suites", default="", help="comma-separated suites to run (default: every one)")
    parser.add_argument(
        "--rechunk-rounds", type=int, default=2, help="rounds of six concurrent re-chunks of one document"
    )
    args = parser.parse_args(argv)
    report = run(args)
    write_atomic(Path(args.out), json.dumps(report, ensure_ascii=False, indent=1))
    summary = {
        name: {k: v for k, v in part.items() if not isinstance(v, list)} if isinstance(part, dict) else part
        for name, part in report.items()
    }
    print(json.dumps(summary, indent=1))
    short = failures(report)
    for line in short:
        print(f"bench.reliability: FAILED {line}", file=sys.stderr)
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
