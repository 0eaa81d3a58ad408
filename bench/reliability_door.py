"""The ``door_limits`` suite of the reliability benchmark: what the servers' doors hold when a caller sends too much
or sends what does not parse.

    python -m bench.reliability --suites door_limits --out /tmp/door_limits.json

* on the LangServe app, with two tenants: a chat message attaching :data:`MANY` small documents is refused (413)
  with no document added; while one tenant's message of :data:`UPLOAD_FILES` documents (:data:`UPLOAD_BYTES` of
  text in all, within the bounds) is read and ingested, the other tenant's one-sentence chat turns are answered,
  each within :data:`OTHER_SECONDS`;
* on ``langgraph dev`` as ``make dev`` runs it: every malformed body (:data:`NOT_JSON`) on every route
  (:data:`DEV_ROUTES`) is a 400 whose ``detail`` gives the reason, a message attaching :data:`MANY` documents is a
  413, and the server's log holds no traceback for any of these requests nor for a run refused in its graph, which
  is one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MANY = 1_000
"""Small documents attached to one message (the default bound is 20)."""

UPLOAD_FILES = 20
"""Documents in the large upload (the default bound on a message's attachments)."""

UPLOAD_BYTES = 1_000_000
"""Bytes of text the large upload's documents hold together (the default bound on them is 16 MiB)."""

OTHER_SECONDS = 2.0
"""Longest another tenant's small request may wait while a large upload is read."""

KEYS = {"uploader": "key-up", "other": "key-other"}

LINE = "Bob Chen manages procurement and the supplier contracts."

NOT_JSON: dict[str, bytes] = {
    "a value missing": b'{"a": }',
    "a number with a leading zero": b'{"a": 01}',
    "a raw NUL byte in a string": b'{"a": "\x00"}',
    "cut short": b'{"assistant_id": "chat", "input": {',
    "a trailing comma": b'{"a": 1,}',
}
"""Bodies that are UTF-8 and pass the size, depth and number checks, but are not JSON."""

DEV_ROUTES = (
    ("POST", "/runs"),
    ("POST", "/runs/wait"),
    ("POST", "/runs/stream"),
    ("POST", "/runs/batch"),
    ("POST", "/threads"),
    ("POST", "/threads/search"),
    ("POST", "/threads/{thread}/runs/wait"),
    ("POST", "/threads/{thread}/state"),
    ("PATCH", "/threads/{thread}"),
    ("POST", "/assistants"),
    ("POST", "/assistants/search"),
    ("PATCH", "/assistants/{assistant}"),
    ("PUT", "/store/items"),
    ("POST", "/mcp"),
    ("POST", "/a2a/chat"),
)
"""Routes of ``langgraph dev`` that take a body ({thread} and {assistant} are real ones)."""


def _note(i: int, size: int = 0) -> dict[str, Any]:
    """A ``text-plain`` document block of about ``size`` bytes (one line when 0), distinct for each ``i``."""
    text = f"{LINE} Note {i}."
    if size:
        text = "\n\n".join(f"## Part {p} of note {i}\n\n{LINE} Item {p}." for p in range(size // 80))
    return {"type": "text-plain", "text": text, "mime_type": "text/plain", "title": f"note-{i}.txt"}


def _message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    words = {"type": "text", "text": "Who manages procurement?"}
    return {"messages": [{"type": "human", "content": [words, *blocks]}]}


def door_limits(folder: Path) -> dict[str, Any]:
    """The suite (see the module): held rows over rows tried."""
    rows = [*langserve_rows(), *dev_rows(folder)]
    return {"cases": len(rows), "held": sum(bool(r["held"]) for r in rows), "rows": rows}


def langserve_rows() -> list[dict[str, Any]]:
    """The attachment bound and another tenant's wait, on the LangServe app in process."""
    from unittest import mock

    from fastapi.testclient import TestClient

    from doubles.replies import offload_chat_model
    from stores.documents import list_documents
    from surfaces.serve import create_app

    rows = []
    keys = json.dumps({name: {"key": key, "namespaces": [name]} for name, key in KEYS.items()})
    with (
        mock.patch.dict(os.environ, {"LONGDOC_SERVER_KEYS": keys}),
        TestClient(create_app(chat_model=offload_chat_model()), raise_server_exceptions=False) as client,
    ):
        up, other = {"x-api-key": KEYS["uploader"]}, {"x-api-key": KEYS["other"]}
        begun = time.perf_counter()
        many = client.post("/offload/invoke", json={"input": _message([_note(i) for i in range(MANY)])}, headers=up)
        added = len(list_documents("uploader"))
        rows.append(
            {
                "case": f"LangServe: a message of {MANY:,} small documents",
                "status": many.status_code,
                "seconds": round(time.perf_counter() - begun, 2),
                "documents_added": added,
                "reason": _said(many)[:200],
                "held": many.status_code == 413 and added == 0,
            }
        )
        doc = client.post("/ingest/invoke", json={"input": {"text": f"{LINE} Falcon."}}, headers=other)
        rows.append(_other_tenant(client, up, other, str(doc.json()["output"]["doc_id"])))
    return rows


def _other_tenant(client: Any, up: dict[str, str], other: dict[str, str], doc_id: str) -> dict[str, Any]:
    """Another tenant's chat turns, one after the other, while a large upload is read: their seconds."""
    size = UPLOAD_BYTES // UPLOAD_FILES
    upload = {"input": _message([_note(i, size) for i in range(UPLOAD_FILES)])}
    answered: dict[str, Any] = {}

    def send() -> None:
        begun = time.perf_counter()
        reply = client.post("/offload/invoke", json=upload, headers=up)
        answered.update(status=reply.status_code, seconds=round(time.perf_counter() - begun, 1))

    turn = {"input": {"question": "Who manages procurement?", "doc_id": doc_id}}
    client.post("/offload/invoke", json=turn, headers=other)  # a first turn's one-time work, before the upload
    sender = threading.Thread(target=send, name="large-upload")
    sender.start()
    waits: list[float] = []
    failed = 0
    while sender.is_alive():
        begun = time.perf_counter()
        reply = client.post("/offload/invoke", json=turn, headers=other)
        waits.append(time.perf_counter() - begun)
        failed += reply.status_code != 200
    sender.join()
    during = waits[:-1] or waits  # the last turn may have begun after the upload ended
    return {
        "case": f"LangServe: another tenant's chat turns while {UPLOAD_FILES} documents of {UPLOAD_BYTES:,} bytes "
        "are ingested",
        "upload_status": answered.get("status"),
        "upload_seconds": answered.get("seconds"),
        "turns": len(waits),
        "failed_turns": failed,
        "max_wait_seconds": round(max(waits, default=0.0), 2),
        "median_wait_seconds": round(sorted(waits)[len(waits) // 2], 2) if waits else None,
        "waits": [round(w, 2) for w in waits],
        "held": answered.get("status") == 200 and not failed and len(during) >= 3 and max(waits) <= OTHER_SECONDS,
    }


def _said(reply: Any) -> str:
    """The reason a refused reply gives (``detail``), else its text."""
    try:
        return str(reply.json().get("detail") or reply.text)
    except (ValueError, AttributeError):
        return str(reply.text)


def dev_rows(folder: Path, timeout: float = 180) -> list[dict[str, Any]]:
    """Malformed bodies, the attachment bound and the log, on ``langgraph dev`` as ``make dev`` runs it."""
    import httpx

    from deploy.cluster import stop, wait_until
    from doubles import endpoint as fake_endpoint

    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if exe is None:
        return [{"case": "langgraph dev", "held": False, "error": "the langgraph CLI is not installed"}]
    work = folder / "door-dev-project"
    ignore = shutil.ignore_patterns(".venv", ".git", "node_modules", ".langgraph_api", "*.pyc", ".*_cache", "results")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(Path(__file__).resolve().parents[1], work, ignore=ignore)
    log_path = folder / "door-dev.log"
    with fake_endpoint.running(fake_endpoint.create_app(fake_endpoint.Script())) as model:
        port = fake_endpoint.free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(work),
            "LONGDOC_HOME": str(folder / "door-dev-home"),
            "LONGDOC_EMBEDDER": "hash",
            "LONGDOC_BASE_URL": f"{model}/v1",
            "LONGDOC_MODEL": "scripted",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
        }
        with log_path.open("wb") as log:
            args = [exe, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"]
            proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
            url = f"http://127.0.0.1:{port}"
            try:
                wait_until(f"{url}/ok", timeout, proc)
                with httpx.Client(base_url=url, timeout=120) as http:
                    start = log_path.stat().st_size
                    rows = [_dev_malformed(http), _dev_many(http)]
                    rows.append(_dev_refused_run(http, log_path))
                    time.sleep(1)  # the server's last log lines of these requests
                    rows.append(_dev_log(log_path, start))
            finally:
                stop(proc)
    shutil.rmtree(work, ignore_errors=True)
    return rows


def _dev_malformed(http: Any) -> dict[str, Any]:
    """Every malformed body on every route: a 400 whose ``detail`` gives a reason (status 0: no answer)."""
    import httpx

    thread = http.post("/threads", json={}).json()["thread_id"]
    assistant = http.post("/assistants/search", json={"graph_id": "chat", "limit": 1}).json()[0]["assistant_id"]
    unclear: list[str] = []
    statuses: dict[int, int] = {}
    for method, route in DEV_ROUTES:
        path = route.format(thread=thread, assistant=assistant)
        for name, raw in NOT_JSON.items():
            try:
                reply = http.request(method, path, content=raw, headers={"content-type": "application/json"})
            except httpx.HTTPError as exc:  # the server dropped the connection: no answer at all
                statuses[0] = statuses.get(0, 0) + 1
                unclear.append(f"{method} {route} {name}: {type(exc).__name__}")
                continue
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            if reply.status_code != 400 or not _said(reply).strip() or "Internal Server Error" in reply.text:
                unclear.append(f"{method} {route} {name}: {reply.status_code}")
    return {
        "case": "langgraph dev: bodies that are not JSON on every route",
        "tried": len(DEV_ROUTES) * len(NOT_JSON),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "unclear": unclear[:10],
        "held": not unclear,
    }


def _dev_many(http: Any) -> dict[str, Any]:
    """A chat message of :data:`MANY` small documents on ``langgraph dev``: a 413 before any is read."""
    begun = time.perf_counter()
    run = {"assistant_id": "chat", "input": _message([_note(i) for i in range(MANY)])}
    reply = http.post("/runs/wait", json=run, timeout=600)
    return {
        "case": f"langgraph dev: a message of {MANY:,} small documents",
        "status": reply.status_code,
        "seconds": round(time.perf_counter() - begun, 2),
        "reason": _said(reply)[:200],
        "held": reply.status_code == 413,
    }


def _dev_refused_run(http: Any, log_path: Path) -> dict[str, Any]:
    """A run its graph refuses (an empty question): answered with the reason, one line in the log."""
    start = log_path.stat().st_size
    reply = http.post("/runs/wait", json={"assistant_id": "ask", "input": {"question": " ", "text": LINE}})
    said = json.dumps(reply.json()) if reply.headers.get("content-type", "").startswith("application/json") else ""
    time.sleep(1)  # the run's log lines, written once it ended
    lines = _log_lines(log_path, start)
    noted = [line for line in lines if "question is empty" in line]
    return {
        "case": "langgraph dev: a run its graph refuses is one log line",
        "answer": said[:200],
        "lines_naming_it": len(noted),
        "tracebacks": sum("Traceback" in line for line in lines),
        "held": "question is empty" in said and len(noted) == 1 and not any("Traceback" in x for x in lines),
    }


def _log_lines(log_path: Path, start: int) -> list[str]:
    with log_path.open("rb") as log:
        log.seek(start)
        return log.read().decode("utf-8", errors="replace").splitlines()


def _dev_log(log_path: Path, start: int) -> dict[str, Any]:
    """The dev server's log over every request above: no traceback."""
    lines = _log_lines(log_path, start)
    tracebacks = sum("Traceback (most recent call last)" in line for line in lines)
    case = "langgraph dev: no traceback for a refused request"
    return {"case": case, "tracebacks": tracebacks, "held": not tracebacks}
