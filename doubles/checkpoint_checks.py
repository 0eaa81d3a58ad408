"""Reading the SQLite checkpoint database back (tests of what it keeps)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def db_holds(home: Path, needle: str) -> list[str]:
    """``table.column`` of every row of the checkpoint database whose value contains ``needle``."""
    path = home / "checkpoints.sqlite"
    if not path.exists():
        return []
    found = []
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT * FROM {table}"):
                for column, value in zip(columns, row, strict=True):
                    raw = value if isinstance(value, bytes) else str(value).encode()
                    if needle.encode() in raw:
                        found.append(f"{table}.{column}")
    if needle.encode() in path.read_bytes():
        found.append("file")
    return found


def threads_holding(home: Path, needle: str) -> set[str]:
    """The thread ids of the checkpoints and writes whose row contains ``needle``."""
    found: set[str] = set()
    with sqlite3.connect(home / "checkpoints.sqlite") as db:
        for table in ("checkpoints", "writes"):
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            for row in db.execute(f"SELECT * FROM {table}"):
                values = dict(zip(columns, row, strict=True))
                if any(needle.encode() in (v if isinstance(v, bytes) else str(v).encode()) for v in row):
                    found.add(str(values["thread_id"]))
    return found


def thread_rows(home: Path, thread_id: str) -> int:
    with sqlite3.connect(home / "checkpoints.sqlite") as db:
        return sum(
            db.execute(f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", (thread_id,)).fetchone()[0]
            for table in ("checkpoints", "writes")
        )


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}
