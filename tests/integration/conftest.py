"""Integration tests: real bundled model and real servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from stores.local_model import listening_socket

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


Start = Callable[..., tuple[subprocess.Popen[bytes], Path]]
"""``start(args, env, cwd=ROOT, pass_fds=())``: a server process whose output goes to a log; the process and log."""


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Start]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        args: list[str], env: dict[str, str], cwd: Path = ROOT, pass_fds: Sequence[int] = ()
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"server{len(procs)}.log"
        proc = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=log.open("wb"), stderr=subprocess.STDOUT, pass_fds=tuple(pass_fds)
        )
        procs.append(proc)
        return proc, log

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_on_socket(start: Start, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path, str]:
    """Start ``args`` (a server taking ``--fd N``: uvicorn, ``doubles.endpoint``) on a loopback socket bound here
    to a port the system picked, handed down to the process: its process, log and URL."""
    sock = listening_socket()
    try:
        proc, log = start([*args, "--fd", str(sock.fileno())], env, pass_fds=(sock.fileno(),))
        return proc, log, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()  # the server holds it now


def uvicorn_args(app: str) -> list[str]:
    """The command serving the ASGI app ``app`` with uvicorn (:func:`serve_on_socket` adds the socket)."""
    return [sys.executable, "-m", "uvicorn", app]


DEV_ARGS = ["dev", "--host", "127.0.0.1", "--port", "0", "--no-browser", "--no-reload", "--server-log-level", "info"]
"""``langgraph dev`` as ``make dev`` runs it, on a port the system picks when the server binds (it takes no
socket from its parent); its log then names the port (:func:`dev_url`)."""
RUNNING = re.compile(rb"Uvicorn running on (http://127\.0\.0\.1:\d+)")


def dev_url(proc: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> str:
    """The URL ``langgraph dev`` (started with :data:`DEV_ARGS`, output in ``log``) reports once it listens,
    after it answers ``/ok``; RuntimeError when it exits first, TimeoutError when time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = RUNNING.search(log.read_bytes())
        if found:
            url = found.group(1).decode()
            wait_http(f"{url}/ok", deadline - time.monotonic(), proc)
            return url
        if proc.poll() is not None:
            raise RuntimeError(f"langgraph dev exited with {proc.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"langgraph dev did not start in {timeout} s")


@contextlib.contextmanager
def langgraph_dev(langgraph: str, work: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """``langgraph dev`` run from ``work`` on loopback, as ``make dev`` runs it: its URL once it answers."""
    proc = subprocess.Popen([langgraph, *DEV_ARGS], env=env, cwd=work, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        try:
            url = dev_url(proc, log)
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


__all__ = [
    "DEV_ARGS",
    "ROOT",
    "Start",
    "copy_project",
    "dev_url",
    "langgraph_dev",
    "serve_on_socket",
    "uvicorn_args",
    "wait_http",
]
