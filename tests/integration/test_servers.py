"""`langgraph dev` and the LangServe app serve the graphs over HTTP, offline."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.conftest import DEV_ARGS, ROOT, copy_project, dev_url, serve_on_socket, uvicorn_args, wait_http


def test_langgraph_dev_serves_ingest(server_env: dict[str, str], spawn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An ingest run; a file ingested again with other content supersedes its earlier version, which goes once a run
    is answered, the server's thread that read it kept; an earlier version whose content was uploaded too stays."""
    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert exe, "langgraph CLI is installed with the project"
    work = copy_project(tmp_path / "srv")
    root = tmp_path / "root"
    root.mkdir()
    env = {**server_env, "LONGDOC_INGEST_ROOT": str(root)}
    proc, log = spawn([exe, *DEV_ARGS], env, cwd=work)
    try:
        url = dev_url(proc, log)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    assistants = httpx.post(f"{url}/assistants/search", json={"limit": 20}, timeout=30).json()
    assert "ingest" in {a["graph_id"] for a in assistants}
    run = httpx.post(
        f"{url}/runs/wait",
        json={"assistant_id": "ingest", "input": {"text": "Herons wade in shallow water. They eat fish."}},
        timeout=120,
    )
    assert run.status_code == 200, run.text
    assert run.json()["chunks"] == 1
    (root / "vault.md").write_text("# Vault\n\nThe 7731-OSPREY code opens it.\n", encoding="utf-8")
    plan = "# Plan\n\nBob Chen manages procurement.\n"
    (root / "plan.md").write_text(plan, encoding="utf-8")
    thread = httpx.post(f"{url}/threads", json={}, timeout=30).json()["thread_id"]
    ingest = {"assistant_id": "ingest", "input": {"path": "vault.md"}}
    first = httpx.post(f"{url}/threads/{thread}/runs/wait", json=ingest, timeout=120).json()
    planned = httpx.post(f"{url}/runs/wait", json={**ingest, "input": {"path": "plan.md"}}, timeout=120).json()
    uploaded = httpx.post(f"{url}/runs/wait", json={**ingest, "input": {"text": plan}}, timeout=120).json()
    assert uploaded["doc_id"] == planned["doc_id"]  # one content, one document, owned by the upload too
    (root / "plan.md").write_text("# Plan\n\nAda Park manages procurement now.\n", encoding="utf-8")
    (root / "vault.md").write_text("# Vault\n\nThe vault is empty now.\n", encoding="utf-8")
    replanned = httpx.post(f"{url}/runs/wait", json={**ingest, "input": {"path": "plan.md"}}, timeout=120).json()
    assert replanned["superseded"] == [planned["doc_id"]], replanned
    again = httpx.post(f"{url}/runs/wait", json=ingest, timeout=120).json()
    assert again["superseded"] == [first["doc_id"]], again
    from stores.documents import find_document

    deadline = time.monotonic() + 60  # removed after the answer is sent
    while find_document("default", first["doc_id"]) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert find_document("default", first["doc_id"]) is None, log.read_text()[-3000:]
    assert find_document("default", again["doc_id"]) is not None
    assert find_document("default", planned["doc_id"]) is not None  # the pass that removed the vault's kept it
    assert httpx.get(f"{url}/threads/{thread}", timeout=30).status_code == 200


def test_langserve_route_over_http(server_env: dict[str, str], spawn) -> None:  # type: ignore[no-untyped-def]
    from langserve import RemoteRunnable

    proc, log, url = serve_on_socket(spawn, uvicorn_args("surfaces.serve:app"), server_env)
    try:
        wait_http(f"{url}/health", timeout=120, proc=proc)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    remote = RemoteRunnable(f"{url}/ingest/")
    out = remote.invoke(
        {"text": "Kingfishers dive for fish."}, config={"configurable": {"namespace": "remote", "thread_id": "t-1"}}
    )
    assert out["chunks"] == 1 and out["cached"] is False
    again = remote.invoke({"text": "Kingfishers dive for fish."}, config={"configurable": {"namespace": "remote"}})
    assert again["cached"] is True


def test_langgraph_dev_answers_studio_and_the_local_command_line_only(
    server_env: dict[str, str],
    spawn,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """`make dev` as the project configures it: a page on another origin can neither read nor run anything, no
    request moves the model endpoint, and paths stay inside LONGDOC_INGEST_ROOT (MCP's ingest included)."""
    from doubles.endpoint import Script, create_app, running
    from tests.integration import clients

    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert exe
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "falcon.md").write_text("# Falcon\n\nProject Falcon builds solar water pumps.\n", encoding="utf-8")
    work = copy_project(tmp_path / "srv")
    attacker, operator = Script(), Script()
    with running(create_app(attacker)) as evil, running(create_app(operator)) as model:
        env = {
            **server_env,
            "LONGDOC_BASE_URL": f"{model}/v1",
            "LONGDOC_MODEL": "scripted",
            "LONGDOC_API_KEY": "operator-secret-key",
            "LONGDOC_INGEST_ROOT": str(docs),
        }
        proc, log = spawn([exe, *DEV_ARGS], env, cwd=work)
        try:
            url = dev_url(proc, log)
        except (TimeoutError, RuntimeError):
            pytest.fail(log.read_text()[-3000:])
        studio, page = "https://smith.langchain.com", "https://evil.example"
        preflight = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
        allowed = httpx.options(f"{url}/runs/wait", headers={"origin": studio, **preflight}, timeout=30)
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == studio
        assert allowed.headers.get("access-control-allow-private-network") == "true"
        refused = httpx.options(f"{url}/runs/wait", headers={"origin": page, **preflight}, timeout=30)
        assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
        assert "access-control-allow-private-network" not in refused.headers
        readme = str(ROOT / "README.md")
        steal = {"assistant_id": "ingest", "input": {"path": readme}, "context": {"base_url": f"{evil}/v1"}}
        simple = httpx.post(
            f"{url}/runs/wait", content=json.dumps(steal), headers={"origin": page, "content-type": "text/plain"}
        )
        assert simple.status_code == 403
        rebound = httpx.get(f"{url}/threads/search", headers={"host": f"evil.example:{urlsplit(url).port}"}, timeout=30)
        assert rebound.status_code == 403
        chat = {"assistant_id": "offload", "input": {"question": "What is it?", "text": "Herons wade in water."}}
        moved = httpx.post(f"{url}/runs/wait", json={**chat, "context": {"base_url": f"{evil}/v1"}}, timeout=60)
        assert moved.status_code == 400 and "base_url" in moved.text, log.read_text()[-3000:]
        assistant = {"graph_id": "offload", "context": {"model": "gpt-x", "base_url": f"{evil}/v1"}}
        assert httpx.post(f"{url}/assistants", json=assistant, timeout=30).status_code == 400
        outside = httpx.post(f"{url}/runs/wait", json={"assistant_id": "ingest", "input": {"path": readme}}, timeout=60)
        assert outside.status_code == 400 and "LangGraph agents" not in outside.text
        inside = httpx.post(
            f"{url}/runs/wait",
            json={"assistant_id": "ingest", "input": {"path": "falcon.md"}},
            headers={"origin": studio},
        )
        assert inside.status_code == 200 and inside.json()["title"] == "Falcon", inside.text
        assert inside.headers["access-control-allow-origin"] == studio
        session = clients.mcp_session(url, [("ingest", {"path": readme}), ("ingest", {"path": "falcon.md"})])
        escaped, fine = session["results"]
        assert escaped.isError and "no readable file" in clients.text_of(escaped), clients.text_of(escaped)
        assert not fine.isError
    assert attacker.requests == []  # no request, and so no key, ever left for the caller's URL
    titles = {d.title for d in _documents(server_env["LONGDOC_HOME"])}
    assert titles == {"Falcon"}, titles  # the README was never read


def _documents(home: str) -> list[Any]:
    import os

    from stores.documents import list_documents

    old = os.environ.get("LONGDOC_HOME")
    os.environ["LONGDOC_HOME"] = home
    try:
        return list_documents("default")
    finally:
        if old is not None:
            os.environ["LONGDOC_HOME"] = old
