"""`langgraph dev` and the LangServe app serve the graphs over HTTP, offline."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import copy_project, free_port, wait_http


def test_langgraph_dev_serves_ingest(server_env: dict[str, str], spawn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    assert exe, "langgraph CLI is installed with the project"
    port = free_port()
    work = copy_project(tmp_path / "srv")
    proc, log = spawn([exe, "dev", "--port", str(port), "--no-browser", "--no-reload"], server_env, cwd=work)
    try:
        wait_http(f"http://127.0.0.1:{port}/ok", timeout=180, proc=proc)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    assistants = httpx.post(f"http://127.0.0.1:{port}/assistants/search", json={"limit": 20}, timeout=30).json()
    assert "ingest" in {a["graph_id"] for a in assistants}
    run = httpx.post(
        f"http://127.0.0.1:{port}/runs/wait",
        json={"assistant_id": "ingest", "input": {"text": "Herons wade in shallow water. They eat fish."}},
        timeout=120,
    )
    assert run.status_code == 200, run.text
    assert run.json()["chunks"] == 1


def test_langserve_route_over_http(server_env: dict[str, str], spawn) -> None:  # type: ignore[no-untyped-def]
    from langserve import RemoteRunnable

    port = free_port()
    proc, log = spawn(
        [sys.executable, "-m", "uvicorn", "surfaces.serve:app", "--host", "127.0.0.1", "--port", str(port)], server_env
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
    except (TimeoutError, RuntimeError):
        pytest.fail(log.read_text()[-3000:])
    remote = RemoteRunnable(f"http://127.0.0.1:{port}/ingest/")
    out = remote.invoke(
        {"text": "Kingfishers dive for fish."}, config={"configurable": {"namespace": "remote", "thread_id": "t-1"}}
    )
    assert out["chunks"] == 1 and out["cached"] is False
    again = remote.invoke({"text": "Kingfishers dive for fish."}, config={"configurable": {"namespace": "remote"}})
    assert again["cached"] is True
