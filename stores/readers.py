"""The runs reading a namespace, and the one removal that waits for none of them.

Every served run holds its namespace shared (:func:`reading`) from its start to its end, with or without a thread;
removing the earlier versions of changed files (:mod:`surfaces.superseded`) takes it alone and without waiting
(:func:`alone`): while any run reads the namespace the versions stay queued, so no run finds its document gone
half-way. A PostgreSQL advisory lock (shared, or exclusive) when ``LONGDOC_POSTGRES_URL`` is set, so every instance
sharing the database sees the runs of the others; else ``flock`` on a file under ``LONGDOC_HOME/locks`` (the threads
and processes of one machine; the system frees it when its holder dies).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from stores.documents import lock_dir
from stores.extras import require_postgres
from stores.settings import get_settings


def _key(namespace: str) -> str:
    return f"longdoc-readers:{namespace}"


@contextlib.contextmanager
def _locked(namespace: str, shared: bool) -> Iterator[bool]:
    """The namespace's readers lock, shared (waiting for a removal to end) or alone (True only when taken)."""
    url = get_settings().postgres_url
    if url:
        require_postgres()
        from stores.postgres import connect

        with connect(url) as conn:  # a session's advisory locks end with it
            if shared:
                conn.execute("SELECT pg_advisory_lock_shared(hashtextextended(%s, 0))", (_key(namespace),))
                yield True
            else:
                row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (_key(namespace),))
                yield bool((row.fetchone() or (False,))[0])
        return
    folder = lock_dir(namespace)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".readers", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)  # the lock goes with the descriptor


@contextlib.contextmanager
def reading(namespace: str) -> Iterator[None]:
    """Hold ``namespace`` for a run reading it (shared with every other run)."""
    with _locked(namespace, shared=True):
        yield


@contextlib.contextmanager
def alone(namespace: str) -> Iterator[bool]:
    """Hold ``namespace`` alone when no run reads it: True, else False at once (nothing held)."""
    with _locked(namespace, shared=False) as taken:
        yield taken
