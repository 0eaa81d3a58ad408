"""Checkpointers: SQLite by default, Postgres when configured; a thread resumes where it stopped."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from stores.checkpoint import checkpoint_location, open_checkpointer
from stores.local_model import free_port


class Counter(TypedDict):
    steps: Annotated[list[str], lambda a, b: a + b]


def _graph(checkpointer):  # type: ignore[no-untyped-def]
    b = StateGraph(Counter)
    b.add_node("first", lambda s: {"steps": ["first"]})
    b.add_node("second", lambda s: {"steps": ["second"]})
    b.add_edge(START, "first")
    b.add_edge("first", "second")
    b.add_edge("second", END)
    return b.compile(checkpointer=checkpointer, interrupt_before=["second"])


def _exercise(url: str | None) -> None:
    config = {"configurable": {"thread_id": "thread-1"}}
    with open_checkpointer(url) as saver:
        graph = _graph(saver)
        graph.invoke({"steps": []}, config)
        assert graph.get_state(config).next == ("second",)
    with open_checkpointer(url) as saver:
        graph = _graph(saver)
        final = graph.invoke(None, config)
    assert final["steps"] == ["first", "second"]


def test_sqlite_checkpoints_survive_reopening(longdoc_home: Path) -> None:
    _exercise(None)
    assert checkpoint_location() == str(longdoc_home / "checkpoints.sqlite")
    assert (longdoc_home / "checkpoints.sqlite").exists()


def _initdb() -> str | None:
    found = shutil.which("initdb")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return candidates[-1] if candidates else None


@pytest.fixture
def postgres() -> Iterator[str]:
    initdb = _initdb()
    if initdb is None:
        pytest.skip("PostgreSQL server binaries are not installed (.ci/run installs them)")
    bindir = Path(initdb).parent
    # PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user,
    # in a folder that user can reach (pytest's own temporary folders are private to root).
    root = Path(tempfile.mkdtemp(prefix="longdoc-pg-"))
    data = root / "pg"
    data.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        root.chmod(0o755)
        shutil.chown(root, "postgres")
        shutil.chown(data, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "longdoc", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *prefix,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data / "log"),
            "-w",
            "start",
            "-o",
            f"-p {port} -h 127.0.0.1 -k {data}",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [
                *prefix,
                str(bindir / "createdb") if (bindir / "createdb").exists() else "createdb",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "longdoc",
                "checkpoints",
            ],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://longdoc@127.0.0.1:{port}/checkpoints"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_checkpoints_survive_reopening(postgres: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_POSTGRES_URL", postgres)
    _exercise(None)
    assert checkpoint_location().startswith("postgresql://longdoc@127.0.0.1:")
