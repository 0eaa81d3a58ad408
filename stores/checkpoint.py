"""Checkpointers: SQLite under ``LONGDOC_HOME`` by default, Postgres when ``LONGDOC_POSTGRES_URL`` is set.

Graphs listed in ``langgraph.json`` compile without one (the server brings its own); Python,
CLI and LangServe callers open one here and compile with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from langgraph.checkpoint.base import BaseCheckpointSaver

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
def open_checkpointer(url: str | None = None) -> Iterator[BaseCheckpointSaver]:
    """A synchronous saver for the configured backend (tables created on first use)."""
    settings = get_settings()
    pg = url if url and url.startswith("postgres") else (None if url else settings.postgres_url)
    if pg:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(pg) as saver:
            saver.setup()
            yield saver
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
async def open_async_checkpointer(url: str | None = None) -> AsyncIterator[BaseCheckpointSaver]:
    """An asyncio saver for the configured backend (used by the LangServe app)."""
    settings = get_settings()
    pg = url if url and url.startswith("postgres") else (None if url else settings.postgres_url)
    if pg:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(pg) as saver:
            await saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = url or str(settings.home / "checkpoints.sqlite")
    if path != ":memory:":
        settings.home.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.conn.execute("PRAGMA secure_delete = ON")
        await saver.setup()
        yield saver
