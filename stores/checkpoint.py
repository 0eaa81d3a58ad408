"""Checkpointers: SQLite under ``LONGDOC_HOME`` by default, Postgres (scaleout extra) with ``LONGDOC_POSTGRES_URL``.

Graphs listed in ``langgraph.json`` compile without one (the server brings its own); Python,
CLI and LangServe callers open one here and compile with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from stores.errors import InputError
from stores.extras import require_postgres
from stores.settings import get_settings


def checkpoint_location() -> str:
    """Where checkpoints go: the Postgres URL (password hidden) or the SQLite file."""
    settings = get_settings()
    if settings.postgres_url:
        from urllib.parse import urlparse

        url = urlparse(settings.postgres_url)
        host = url.hostname or "localhost"
        return f"postgresql://{url.username + '@' if url.username else ''}{host}:{url.port or 5432}{url.path}"
    return str(settings.home / "checkpoints.sqlite")


@contextlib.contextmanager
def open_checkpointer(url: str | None = None) -> Iterator[BaseCheckpointSaver[Any]]:
    """A synchronous saver for the configured backend (tables created on first use)."""
    settings = get_settings()
    pg = url if url and url.startswith("postgres") else (None if url else settings.postgres_url)
    if pg:
        require_postgres()
        from stores.postgres import postgres_saver

        with postgres_saver(pg) as opened:
            yield opened
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = url or str(settings.home / "checkpoints.sqlite")
    if path != ":memory:":
        settings.home.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(path) as saver:
        saver.conn.execute("PRAGMA secure_delete = ON")  # a deleted thread's pages are zeroed, not left readable
        saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def open_async_checkpointer(url: str | None = None) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """An asyncio saver for the configured backend (used by the LangServe app)."""
    settings = get_settings()
    pg = url if url and url.startswith("postgres") else (None if url else settings.postgres_url)
    if pg:
        require_postgres()
        from stores.postgres import async_postgres_saver

        async with async_postgres_saver(pg) as opened:
            yield opened
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = url or str(settings.home / "checkpoints.sqlite")
    if path != ":memory:":
        settings.home.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.conn.execute("PRAGMA secure_delete = ON")
        await saver.setup()
        yield saver


def truncate_log(saver: Any) -> None:
    """Fold a SQLite saver's write-ahead log into its file and empty the log.

    This way rows just deleted leave no copy in it (the file's own pages are zeroed as rows go: ``secure_delete``).
    Nothing to do for PostgreSQL.
    """
    saver = getattr(saver, "target", None) or saver
    conn: Any = getattr(saver, "conn", None)
    if type(conn).__module__ == "sqlite3":
        with saver.lock:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def atruncate_log(saver: Any) -> None:
    """:func:`truncate_log` for an asyncio SQLite saver (the LangServe app's)."""
    saver = getattr(saver, "target", None) or saver
    conn: Any = getattr(saver, "conn", None)
    if type(conn).__module__.startswith("aiosqlite"):
        async with saver.lock:
            await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class ThreadBusy(InputError):
    """Another run on the thread is still going: one run at a time per thread (HTTP 409, exit code 2)."""

    status = 409


def thread_lock_path(thread_id: str) -> Path:
    """The lock file of a thread under ``LONGDOC_HOME`` (named by a digest: thread ids hold any character)."""
    digest = hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:32]
    return get_settings().home / "locks" / "threads" / f"{digest}.lock"


class ThreadLock:
    """The right to run on one thread, held by one run at a time.

    A PostgreSQL advisory lock when ``LONGDOC_POSTGRES_URL`` is set (every instance sharing the database;
    held on a connection of its own, so a killed holder frees it), else a file lock under ``LONGDOC_HOME``
    (the threads and processes of one machine; the system frees it when its process dies).
    """

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self._conn: Any = None
        self._file: Any = None

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the thread, waiting up to ``wait`` seconds for its run to end; False when it is still busy."""
        deadline = time.monotonic() + max(0.0, wait)
        url = get_settings().postgres_url
        if url:
            require_postgres()
            from stores.postgres import connect

            self._conn = connect(url)
            key = f"longdoc-run:{self.thread_id}"
            while True:
                row = self._conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
                if row and row[0]:
                    return True
                if time.monotonic() >= deadline:
                    self._conn.close()
                    self._conn = None
                    return False
                time.sleep(0.2)
        from filelock import FileLock, Timeout

        path = thread_lock_path(self.thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = FileLock(str(path), thread_local=False)
        try:
            self._file.acquire(timeout=max(0.0, deadline - time.monotonic()), poll_interval=0.2)
        except Timeout:
            self._file = None
            return False
        return True

    def release(self) -> None:
        """Give the thread back (its connection closed, its file unlocked)."""
        if self._conn is not None:
            self._conn.close()  # a session's advisory locks end with it
            self._conn = None
        if self._file is not None:
            self._file.release()
            self._file = None


def busy_message(thread_id: str) -> str:
    """What a run refused on a busy thread is told."""
    return (
        f"thread {thread_id[-80:]!r} has a run still going: one run at a time per thread; "
        "send this input again once that run has ended (the same input then resumes it if it died)"
    )


@contextlib.contextmanager
def thread_lock(thread_id: str, wait: float = 0.0) -> Iterator[None]:
    """Hold ``thread_id`` for one run (:class:`ThreadLock`); :class:`ThreadBusy` when another run holds it."""
    lock = ThreadLock(thread_id)
    if not lock.acquire(wait):
        raise ThreadBusy(busy_message(thread_id))
    try:
        yield
    finally:
        lock.release()


@contextlib.asynccontextmanager
async def athread_lock(thread_id: str) -> AsyncIterator[None]:
    """:func:`thread_lock` for asyncio callers (taken and given back on a worker thread)."""
    import anyio

    lock = ThreadLock(thread_id)
    if not await anyio.to_thread.run_sync(lock.acquire):
        raise ThreadBusy(busy_message(thread_id))
    try:
        yield
    finally:
        await anyio.to_thread.run_sync(lock.release)
