"""Integration tests: real bundled model and real servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stores.local_model import free_port

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.enable_socket)


def wait_http(url: str, timeout: float = 120.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200 (or the process dies / time runs out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout} s")


@pytest.fixture
def server_env(longdoc_home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "LONGDOC_HOME": str(longdoc_home),
            "LONGDOC_EMBEDDER": "hash",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"server{len(procs)}.log"
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc, log

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def langgraph_dev(langgraph: str, work: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """``langgraph dev`` run from ``work`` on a free loopback port, as ``make dev`` runs it: its URL once it answers."""
    port = free_port()
    args = [langgraph, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"]
    proc = subprocess.Popen(args, env=env, cwd=work, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(f"{url}/ok", timeout=180, proc=proc)
        except (TimeoutError, RuntimeError):
            pytest.fail(log.read_text(errors="replace")[-3000:])
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def copy_project(dest: Path) -> Path:
    """A copy of the project (sources, no caches) where ``langgraph dev`` may write its own files."""
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "node_modules", ".langgraph_api", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache"
    )
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


__all__ = ["ROOT", "copy_project", "free_port", "langgraph_dev", "wait_http"]
