"""Every workflow served by `langgraph dev` and by the LangServe app, end to end over HTTP.

The graphs call a scripted OpenAI-compatible endpoint (``doubles.endpoint``) through the
same ChatOpenAI path as any real endpoint, so every graph runs in seconds.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from surfaces.registry import canonical
from tests.integration.conftest import DEV_ARGS, ROOT, dev_url, serve_on_socket, uvicorn_args, wait_http

DOC = (
    "# Project Falcon\n\nProject Falcon builds a solar water pump for farms.\n\n"
    "## Budget\n\nThe committee approved 40,000 euros in March.\n\n"
    "## Team\n\nBob Chen manages procurement. Alice Moreau leads engineering.\n"
)
GRAPHS = json.loads((ROOT / "langgraph.json").read_text())["graphs"]


def inputs(doc_id: str) -> dict[str, dict[str, Any]]:
    """A small valid input for every workflow."""
    return {
        "ingest": {"text": "Herons wade in shallow water. They eat fish."},
        "ask": {"question": "Who manages procurement?", "doc_id": doc_id},
        "summarize": {"doc_id": doc_id, "length": 40},
        "chat": {"question": "What was approved?", "doc_id": doc_id},
        "route": {"request": "summarize a long meeting transcript", "registry": "longdoc"},
    }


@pytest.fixture
def fake_env(server_env: dict[str, str], spawn) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    proc, log, url = serve_on_socket(spawn, [sys.executable, "-m", "doubles.endpoint"], server_env)
    try:
        wait_http(f"{url}/v1/models", timeout=60, proc=proc)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-2000:])
    yield {**server_env, "LONGDOC_BASE_URL": f"{url}/v1", "LONGDOC_MODEL": "scripted"}


def test_langgraph_dev_serves_every_workflow(fake_env: dict[str, str], spawn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert exe
    work = tmp_path / "srv"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".venv", ".git", "node_modules", ".langgraph_api"))
    proc, log = spawn([exe, *DEV_ARGS], fake_env, cwd=work)
    try:
        base = dev_url(proc, log, timeout=240)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    assistants = httpx.post(f"{base}/assistants/search", json={"limit": 50}, timeout=60).json()
    by_graph = {a["graph_id"]: a["assistant_id"] for a in assistants}
    assert set(GRAPHS) <= set(by_graph)
    for name in GRAPHS:
        schemas = httpx.get(f"{base}/assistants/{by_graph[name]}/schemas", timeout=60).json()
        assert schemas["input_schema"]["properties"], name
        context = schemas.get("context_schema") or {}
        props = context.get("properties", {})
        assert "namespace" in props and all(p.get("description") for p in props.values()), name
    doc = httpx.post(f"{base}/runs/wait", json={"assistant_id": "ingest", "input": {"text": DOC}}, timeout=300)
    assert doc.status_code == 200, doc.text
    doc_id = doc.json()["doc_id"]
    for name, payload in inputs(doc_id).items():
        if name not in GRAPHS:
            continue
        run = httpx.post(f"{base}/runs/wait", json={"assistant_id": name, "input": payload}, timeout=300)
        assert run.status_code == 200, (name, run.text[-1000:])
        out = run.json()
        assert out and "__error__" not in out, (name, out)


def test_langserve_serves_every_workflow(fake_env: dict[str, str], spawn) -> None:  # type: ignore[no-untyped-def]
    from langserve import RemoteRunnable

    proc, log, base = serve_on_socket(spawn, uvicorn_args("surfaces.serve:app"), fake_env)
    try:
        wait_http(f"{base}/health", timeout=120, proc=proc)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    health = httpx.get(f"{base}/health").json()
    assert {canonical(name) for name in GRAPHS} <= set(health["workflows"])
    doc_id = RemoteRunnable(f"{base}/ingest/").invoke({"text": DOC})["doc_id"]
    for name, payload in inputs(doc_id).items():
        if name not in health["workflows"]:
            continue
        out = RemoteRunnable(f"{base}/{name}/").invoke(payload, config={"configurable": {"thread_id": f"t-{name}"}})
        assert out, name
        assert httpx.get(f"{base}/{name}/playground/", timeout=30).status_code == 200
    chain = RemoteRunnable(f"{base}/chain/")  # the former id of ask
    events = list(chain.stream(inputs(doc_id)["ask"]))
    assert events
    answers = chain.batch([inputs(doc_id)["ask"]] * 2)
    assert len(answers) == 2 and all(a["answer"] for a in answers)
    if "chat" in health["workflows"]:
        again = RemoteRunnable(f"{base}/offload/").invoke(  # the former id of chat, on the same thread
            inputs(doc_id)["chat"], config={"configurable": {"thread_id": "t-chat"}}
        )
        assert again["turn"] == 2  # the same thread resumed the session begun above
