"""The doors of the real servers: ``langgraph dev`` as ``make dev`` runs it and one Aegra instance with
PostgreSQL (as ``test_scaleout.py`` runs them), the model the scripted endpoint, embeddings the hash embedder.

A message attaching more documents than a message may (413, none read), bodies that are not JSON (400 with the
reason), assistants made with settings their workflow does not read (400 naming them), and the server's log of a
refused request: the lines naming it, none a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deploy.cluster import chroma_binary, deployment, postgres_bindir
from doubles.endpoint import Script, create_app, running
from tests.integration.conftest import copy_project, langgraph_dev

LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent))
KEYS = {"team-a": "key-a"}
MOST = 3
"""``LONGDOC_MAX_ATTACHMENTS`` of both servers."""
LINE = "Bob Chen manages procurement and the supplier contracts."

pytestmark = [
    pytest.mark.skipif(LANGGRAPH is None, reason="the langgraph CLI is not installed (make install)"),
    pytest.mark.skipif(
        postgres_bindir() is None or chroma_binary() is None,
        reason="PostgreSQL server binaries or the chroma command are not installed (.ci/system-deps, make install)",
    ),
    pytest.mark.xdist_group("doors"),  # one of each server for the module, in one test process
]


def _env(endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        "LONGDOC_EMBEDDER": "hash",
        "LONGDOC_BASE_URL": f"{endpoint}/v1",
        "LONGDOC_MODEL": "scripted",
        "LONGDOC_MAX_ATTACHMENTS": str(MOST),
        "LONGDOC_SERVER_KEYS": json.dumps(KEYS),
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with running(create_app(Script())) as url:
        yield url


@pytest.fixture(scope="module")
def dev(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``langgraph dev`` from a copy of the project: its URL, data home and log."""
    assert LANGGRAPH is not None
    folder = tmp_path_factory.mktemp("door-dev")
    work = copy_project(folder / "srv")
    env = {**_env(endpoint), "LONGDOC_HOME": str(folder / "home"), "PYTHONPATH": str(work)}
    log = folder / "dev.log"
    with langgraph_dev(LANGGRAPH, work, env, log) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield {"http": http, "home": folder / "home", "log": log}


@pytest.fixture(scope="module")
def aegra(endpoint: str) -> Iterator[dict[str, Any]]:
    """One Aegra instance with PostgreSQL and a Chroma server: its client (tenant team-a) and log."""
    with deployment(_env(endpoint), instances=1) as deploy:
        instance = deploy.instances[0]
        with httpx.Client(base_url=instance.url, timeout=120, headers={"X-API-Key": "key-a"}) as http:
            yield {"http": http, "log": instance.log, "deploy": deploy}


def _message(count: int) -> dict[str, Any]:
    notes = [{"type": "text-plain", "text": f"{LINE} Note {i}.", "mime_type": "text/plain"} for i in range(count)]
    return {"messages": [{"type": "human", "content": [{"type": "text", "text": "Who buys?"}, *notes]}]}


def _logged(log: Path, request: Any, naming: str) -> list[str]:
    """The lines ``log`` gains from ``request()`` until its server has written the line ``naming`` the run's error
    (written once the server has answered; a traceback would come with it)."""
    start, deadline = log.stat().st_size, time.monotonic() + 60
    request()
    while True:
        with log.open("rb") as lines:
            lines.seek(start)
            gained = lines.read().decode("utf-8", errors="replace").splitlines()
        if any(naming in line for line in gained) or time.monotonic() > deadline:
            return gained
        time.sleep(0.1)


def test_a_message_attaching_too_many_documents_is_a_413_before_any_is_read(
    dev: dict[str, Any], aegra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.documents import list_documents

    refused = dev["http"].post("/runs/wait", json={"assistant_id": "chat", "input": _message(MOST + 1)})
    assert refused.status_code == 413, refused.text
    assert f"at most {MOST} documents (LONGDOC_MAX_ATTACHMENTS)" in refused.json()["detail"]
    thread = aegra["http"].post("/threads", json={}).json()["thread_id"]
    run = {"assistant_id": "chat", "input": _message(MOST + 1)}
    refused = aegra["http"].post(f"/threads/{thread}/runs/wait", json=run)
    assert refused.status_code == 413 and "LONGDOC_MAX_ATTACHMENTS" in refused.json()["message"], refused.text
    assert aegra["http"].get("/documents").json()["documents"] == []
    assert aegra["http"].get(f"/threads/{thread}/runs").json() == []
    monkeypatch.setenv("LONGDOC_HOME", str(dev["home"]))
    assert list_documents("default") == []
    taken = dev["http"].post("/runs/wait", json={"assistant_id": "chat", "input": _message(MOST)})
    assert taken.status_code == 200 and taken.json()["turn"] == 1, taken.text
    assert len(list_documents("default")) == MOST


@pytest.mark.parametrize(
    "raw", [b'{"a": }', b'{"a": 01}', b'{"a": "\x00"}', b'{"assistant_id": "chat",'], ids=["value", "01", "NUL", "cut"]
)
def test_a_body_that_is_not_json_is_a_400_with_the_reason_on_every_route_of_the_dev_server(
    dev: dict[str, Any], raw: bytes
) -> None:
    http = dev["http"]
    thread = http.post("/threads", json={}).json()["thread_id"]
    for method, path in (
        ("POST", "/runs/wait"),
        ("POST", "/runs/stream"),
        ("POST", "/threads"),
        ("POST", f"/threads/{thread}/runs"),
        ("POST", "/threads/search"),
        ("POST", "/assistants"),
        ("POST", "/assistants/search"),
        ("PUT", "/store/items"),
        ("POST", "/mcp"),
        ("POST", "/a2a/chat"),
    ):
        reply = http.request(method, path, content=raw, headers={"content-type": "application/json"})
        assert reply.status_code == 400, (method, path, reply.status_code, reply.text[:200])
        assert reply.json()["detail"].startswith("the request body is not JSON: "), (path, reply.text)


def test_an_assistant_with_a_setting_its_workflow_does_not_read_is_a_400_naming_it(
    dev: dict[str, Any], aegra: dict[str, Any]
) -> None:
    for http, said in ((dev["http"], "detail"), (aegra["http"], "message")):
        made = http.post("/assistants", json={"graph_id": "chat", "context": {"chunksize": 300}})
        assert made.status_code == 400, made.text
        assert "chat does not take context keys 'chunksize'" in made.json()[said]
        chat = http.post("/assistants/search", json={"graph_id": "chat", "limit": 1}).json()[0]["assistant_id"]
        changed = http.patch(f"/assistants/{chat}", json={"context": {"keep_turn": 2}})
        assert changed.status_code == 400 and "'keep_turn'" in changed.json()[said], changed.text
    kept = {"graph_id": "chat", "context": {"chunk_size": 300}}
    assert dev["http"].post("/assistants", json=kept).status_code == 200
    assert aegra["http"].post("/assistants", json=kept).status_code == 403  # Aegra's assistants are the operator's


def test_a_refused_request_is_one_log_line_without_a_traceback(dev: dict[str, Any], aegra: dict[str, Any]) -> None:
    empty = {"assistant_id": "ask", "input": {"question": " ", "text": LINE}}
    on_dev = _logged(dev["log"], lambda: dev["http"].post("/runs/wait", json=empty), "the question is empty")
    naming = [line for line in on_dev if "the question is empty" in line]
    assert len(naming) == 1 and not any("Traceback" in line for line in on_dev), "\n".join(on_dev)
    thread = aegra["http"].post("/threads", json={}).json()["thread_id"]
    unknown = {"assistant_id": "ask", "input": {"question": "Who buys?", "doc_id": "0123456789abcdef"}}
    answers: list[Any] = []
    on_aegra = _logged(
        aegra["log"],
        lambda: answers.append(aegra["http"].post(f"/threads/{thread}/runs/wait", json=unknown)),
        "is not ingested",
    )
    assert answers[0].status_code == 400, answers[0].text
    naming = [line for line in on_aegra if "is not ingested" in line]
    assert len(naming) == 1 and not any("Traceback" in line for line in on_aegra), "\n".join(on_aegra)
