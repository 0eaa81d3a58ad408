"""Reliability suite ``leave``: clients that leave mid-run, model-call bounds on the dev server, and who it answers.

    python -m bench.reliability --suites leave --out FILE

Run by :mod:`bench.reliability` with the other suites (:func:`leave`, judged by :func:`leave_failures`). Everything
is on loopback: the scripted endpoint of :mod:`doubles.endpoint` in this process (each call 0.3 s), one Aegra
instance with PostgreSQL (as ``tests/integration/test_scaleout.py`` starts it) and ``langgraph dev`` as ``make dev``
runs it, in a copy of the project, with ``LONGDOC_MAX_MODEL_CALLS=4``.

* **A client that leaves**: a request sent over a socket of its own, closed while the run's first model call is in
  flight (seen in the endpoint's request log); then the suite waits until the server has no busy thread (at most
  :data:`SETTLE_SECONDS`) and counts the model calls that reached the endpoint after the client left. Aegra: an MCP
  ``summarize`` (refine, one call per chunk) and an A2A message and streamed message to the chat; ``langgraph
  dev``: a summary on ``/runs/wait`` and ``/runs/stream``, an MCP ``summarize`` and A2A messages. Held when none.
* **The bound on the dev server**: a summary (five calls on the scripted endpoint) on ``/runs/wait`` and as an MCP
  call, with the bound at 4: held when at most 4 calls reached the endpoint and the run said why it stopped.
* **Who the dev server answers**: a request naming ``Host: localhost`` from a peer on the network, at the ASGI level
  (the guard's scope names the peer ``203.0.113.7``, a documentation address) and on the running server, where a
  loopback proxy's ``X-Forwarded-For`` names it (uvicorn trusts loopback proxies): held when refused (403) while
  the same request from loopback is answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parents[1]
NETWORK_PEER = "203.0.113.7"
"""A peer on the network (TEST-NET-3): named in an ASGI scope or a loopback proxy's header, never connected to."""
BOUND = 4
"""``LONGDOC_MAX_MODEL_CALLS`` of the dev server."""
CALL_SECONDS = 0.3
"""How long the scripted endpoint takes over each model call."""
SETTLE_SECONDS = 90.0
"""Most seconds to wait for a server's runs to end once the client left."""
KEY = "key-leave"
TEXT = "# Wells\n\n" + "\n\n".join(
    f"## Well {i}\n\n" + f"Well {i} near Nakuru gave {i} litres on day {i}. Team {i} checked its pump. " * 3
    for i in range(16)
)
"""A document of 16 chunks at the default chunking: a refine summary of it makes 17 model calls."""


def _calls(script: Any) -> int:
    """Chat requests that reached the scripted endpoint so far."""
    return sum(r["path"].endswith("/chat/completions") for r in list(script.requests))


def _wait_for(done: Callable[[], bool], seconds: float) -> bool:
    """Poll ``done`` every 0.1 s until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _busy(url: str, headers: dict[str, str]) -> bool:
    """Whether a thread of the server at ``url`` has a run going."""
    found = httpx.post(f"{url}/threads/search", json={"status": "busy", "limit": 5}, headers=headers, timeout=30)
    return bool(found.status_code == 200 and found.json())


def leave_mid_run(
    url: str, path: str, body: dict[str, Any], script: Any, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """POST ``body`` to ``url + path`` over a socket of its own and close it once the run's first model call reached
    the endpoint; wait until the server has no busy thread: the calls started before and after the client left."""
    headers = headers or {}
    host = urlsplit(url)
    _wait_for(lambda: not _busy(url, headers), SETTLE_SECONDS)
    start = _calls(script)
    payload = json.dumps(body).encode()
    fields = {"Host": host.netloc, "Content-Type": "application/json", "Content-Length": str(len(payload))}
    fields |= {"Accept": "application/json, text/event-stream", **headers}
    head = "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    client = socket.create_connection((str(host.hostname), int(host.port or 80)))
    client.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + payload)
    reached = _wait_for(lambda: _calls(script) > start, 60)
    client.close()
    left = _calls(script)
    settled = _wait_for(lambda: not _busy(url, headers), SETTLE_SECONDS)
    after = _calls(script) - left
    return {
        "calls_before_leaving": left - start,
        "calls_after_leaving": after,
        "run_ended": settled,
        "held": reached and settled and after == 0,
    }


def _a2a(doc_id: str, method: str = "SendMessage") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": "Who checked pump 3?"}, {"data": {"doc_id": doc_id}}]
    message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": parts}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def _mcp(arguments: dict[str, Any], name: str = "summarize") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _thread(url: str, headers: dict[str, str]) -> str:
    made = httpx.post(f"{url}/threads", json={}, headers=headers, timeout=30)
    made.raise_for_status()
    return str(made.json()["thread_id"])


def _ingest(url: str, headers: dict[str, str], copy: int = 0) -> str:
    """The id of :data:`TEXT` (its copy ``copy``: a document of its own) ingested through ``/runs/wait``."""
    body = {"assistant_id": "ingest", "input": {"text": TEXT + (f"\n\nCopy {copy}." if copy else "")}}
    done = httpx.post(f"{url}/threads/{_thread(url, headers)}/runs/wait", json=body, headers=headers, timeout=120)
    done.raise_for_status()
    return str(done.json()["doc_id"])


# --- Aegra ------------------------------------------------------------------------------------------------------
def aegra_rows(script: Any, endpoint: str) -> list[dict[str, Any]]:
    """An MCP call and A2A messages whose client leaves mid-run, on one Aegra instance with PostgreSQL (in a folder
    of its own that the ``postgres`` user can reach)."""
    from deploy.cluster import deployment

    env = {
        **os.environ,
        "LONGDOC_BASE_URL": f"{endpoint}/v1",
        "LONGDOC_MODEL": "scripted",
        "LONGDOC_EMBEDDER": "hash",
        "LONGDOC_SERVER_KEYS": json.dumps({"team-leave": KEY}),
    }
    rows = []
    with deployment(env, instances=1) as cluster:
        url, key = cluster.instances[0].url, {"X-API-Key": KEY}
        doc_id = _ingest(url, key)
        for case, path, body in (
            ("Aegra /mcp summarize (refine)", "/mcp", _mcp({"doc_id": doc_id, "method": "refine"})),
            ("Aegra /a2a SendMessage", "/a2a/chat", _a2a(doc_id)),
            ("Aegra /a2a SendStreamingMessage", "/a2a/chat", _a2a(doc_id, "SendStreamingMessage")),
        ):
            rows.append({"case": case, **leave_mid_run(url, path, body, script, key)})
    return rows


# --- langgraph dev ----------------------------------------------------------------------------------------------
@contextmanager
def dev_server(folder: Path, endpoint: str, timeout: float = 240) -> Iterator[str]:
    """``langgraph dev`` as ``make dev`` runs it, in a copy of the project, with the model on ``endpoint`` and
    ``LONGDOC_MAX_MODEL_CALLS`` at :data:`BOUND`: its URL."""
    from deploy.cluster import stop, wait_until
    from stores.local_model import free_port

    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if exe is None:
        raise RuntimeError("the langgraph CLI is not installed (make install)")
    work = folder / "leave-dev-project"
    ignore = shutil.ignore_patterns(".venv", ".git", "node_modules", ".langgraph_api", "*.pyc", ".*_cache", "results")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT, work, ignore=ignore)
    env = {
        **os.environ,
        "LONGDOC_HOME": str(folder / "leave-dev-home"),
        "LONGDOC_BASE_URL": f"{endpoint}/v1",
        "LONGDOC_MODEL": "scripted",
        "LONGDOC_EMBEDDER": "hash",
        "LONGDOC_MAX_MODEL_CALLS": str(BOUND),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
    }
    port = free_port()
    with (folder / "leave-dev.log").open("wb") as log:
        args = [exe, "dev", "--port", str(port), "--no-browser", "--no-reload"]
        proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(f"http://127.0.0.1:{port}/ok", timeout, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)
    shutil.rmtree(work, ignore_errors=True)


def dev_rows(folder: Path, script: Any, endpoint: str) -> list[dict[str, Any]]:
    """Every run route of ``langgraph dev`` left mid-run; its bound on model calls; a network peer naming localhost."""
    rows = []
    with dev_server(folder, endpoint) as url:
        doc_id = _ingest(url, {})
        summary = {"assistant_id": "summarize", "input": {"doc_id": doc_id, "length": 40}}
        for case, path, body in (
            ("dev /runs/wait summarize", f"/threads/{_thread(url, {})}/runs/wait", summary),
            ("dev /runs/stream summarize", f"/threads/{_thread(url, {})}/runs/stream", summary),
            ("dev /mcp summarize", "/mcp", _mcp({"doc_id": doc_id, "length": 40})),
            ("dev /a2a SendMessage", "/a2a/chat", _a2a(doc_id)),
            ("dev /a2a SendStreamingMessage", "/a2a/chat", _a2a(doc_id, "SendStreamingMessage")),
        ):
            rows.append({"case": case, **leave_mid_run(url, path, body, script, {})})
        rows.extend(_bounded(url, script))
        rows.append(_forwarded_peer(url))
    return rows


def _bounded(url: str, script: Any) -> list[dict[str, Any]]:
    """A summary of five calls with the bound at four, on ``/runs/wait`` and as an MCP call, each of a document of
    its own (no expert answer cached): the calls made and the answer."""
    rows: list[dict[str, Any]] = []
    summary = {"assistant_id": "summarize", "input": {"doc_id": _ingest(url, {}, copy=1), "length": 40}}
    doc_id = _ingest(url, {}, copy=2)
    start = _calls(script)
    ran = httpx.post(f"{url}/threads/{_thread(url, {})}/runs/wait", json=summary, timeout=120)
    rows.append({"case": "dev /runs/wait, bound of 4", "calls": _calls(script) - start, "answer": ran.text[:300]})
    start = _calls(script)
    mcp = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    called = httpx.post(f"{url}/mcp", json=_mcp({"doc_id": doc_id, "length": 40}), headers=mcp, timeout=120)
    rows.append({"case": "dev /mcp, bound of 4", "calls": _calls(script) - start, "answer": called.text[:300]})
    for row in rows:
        row["names_the_bound"] = "LONGDOC_MAX_MODEL_CALLS" in row["answer"]
        row["held"] = row["calls"] <= BOUND and row["names_the_bound"]
    return rows


def _forwarded_peer(url: str) -> dict[str, Any]:
    """``Host: localhost`` from a network peer as the running server sees it (a loopback proxy names it)."""
    host = {"host": f"localhost:{urlsplit(url).port}"}
    peer = httpx.post(f"{url}/threads/search", json={}, headers={**host, "x-forwarded-for": NETWORK_PEER}, timeout=30)
    local = httpx.post(f"{url}/threads/search", json={}, headers=host, timeout=30)
    return {
        "case": "dev server: a network peer naming localhost",
        "network_peer_status": peer.status_code,
        "loopback_status": local.status_code,
        "held": peer.status_code == 403 and local.status_code == 200,
    }


def peer_rows() -> list[dict[str, Any]]:
    """The dev server's guard, at the ASGI level: ``Host: localhost`` from a network peer and from loopback."""
    from surfaces.studio import StudioGuard

    def status(client: tuple[str, int]) -> int:
        sent: list[int] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"[]"})

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent.append(message["status"])

        headers = [(b"host", b"localhost:2024")]
        scope = {"type": "http", "method": "GET", "path": "/threads", "root_path": "", "headers": headers}
        asyncio.run(StudioGuard(app)({**scope, "client": client, "server": ("0.0.0.0", 2024)}, receive, send))
        return sent[0]

    peer, local = status((NETWORK_PEER, 41000)), status(("127.0.0.1", 41000))
    return [
        {
            "case": "dev guard (ASGI): a network peer naming localhost",
            "network_peer_status": peer,
            "loopback_status": local,
            "held": peer == 403 and local == 200,
        }
    ]


# --- the suite ----------------------------------------------------------------------------------------------------
def leave(folder: Path) -> dict[str, Any]:
    """The suite: every row of :func:`peer_rows`, :func:`dev_rows` and :func:`aegra_rows` (see the module)."""
    from deploy.cluster import chroma_binary, postgres_bindir
    from doubles import endpoint as fake_endpoint

    rows = peer_rows()
    script = fake_endpoint.Script(prompt_seconds=CALL_SECONDS)
    with fake_endpoint.running(fake_endpoint.create_app(script)) as endpoint:
        try:
            rows += dev_rows(folder, script, endpoint)
        except (RuntimeError, TimeoutError, httpx.HTTPError, subprocess.SubprocessError) as exc:
            rows.append({"case": "langgraph dev", "held": False, "error": str(exc)[:300]})
        if postgres_bindir() is None or chroma_binary() is None:
            rows.append({"case": "Aegra", "held": False, "error": "PostgreSQL or the chroma command is missing"})
        else:
            try:
                rows += aegra_rows(script, endpoint)
            except (RuntimeError, TimeoutError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                rows.append({"case": "Aegra", "held": False, "error": str(exc)[:300]})
    return {"cases": len(rows), "held": sum(bool(r["held"]) for r in rows), "rows": rows}


def leave_failures(part: dict[str, Any]) -> list[str]:
    """What in the leave suite falls short: each case that did not hold, with what it measured."""
    if not part:
        return []
    if not part.get("cases"):
        return ["leave: no case ran"]
    short = [
        f"{r['case']} ({', '.join(f'{k} {v}' for k, v in r.items() if k not in ('case', 'held'))})"
        for r in part.get("rows", [])
        if not r["held"]
    ]
    return [f"leave: did not hold: {'; '.join(short)}"] if short else []
