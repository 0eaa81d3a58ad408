"""PostgreSQL storage (``LONGDOC_POSTGRES_URL``): connections and LangGraph's checkpoint savers.

Part of the ``scaleout`` extra, with the deployment that shares one database across instances. The modules of a
plain install reach it only after :func:`stores.extras.require_postgres`, which names the extra when it is missing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver


def connect(url: str) -> psycopg.Connection[Any]:
    """A connection in autocommit mode (advisory locks and single statements), closed by its ``with`` block."""
    return psycopg.connect(url, autocommit=True)


@contextlib.contextmanager
def postgres_saver(url: str) -> Iterator[PostgresSaver]:
    """A synchronous checkpoint saver on ``url``, its tables created on first use."""
    with PostgresSaver.from_conn_string(url) as opened:
        opened.setup()
        yield opened


@contextlib.asynccontextmanager
async def async_postgres_saver(url: str) -> AsyncIterator[AsyncPostgresSaver]:
    """An asyncio checkpoint saver on ``url``, its tables created on first use."""
    async with AsyncPostgresSaver.from_conn_string(url) as opened:
        await opened.setup()
        yield opened
