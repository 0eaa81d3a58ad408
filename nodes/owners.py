"""Who put each document into a namespace: its files, its uploads, and what replaced an earlier version.

Document ids are content hashes, so a file and a text with the same content share one document. A document is
kept while anything owns it: a file of the namespace's manifests (:mod:`nodes.ingest_dir`) or an upload (a
``text``, a file's bytes, a chat attachment: :func:`record_upload`). A file ingested again with other content
gives up its earlier version, which is removed only when nothing else owns it (:mod:`surfaces.superseded`). The
manifest then says which version replaced it (``replaced``), so a thread that read the earlier version is told
what changed (:func:`check_current`: 410) instead of finding its document missing.

Each table lives in the manifest of its store, an SQLite file per (namespace, vector space) under
``LONGDOC_HOME/manifests``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from stores.documents import find_document
from stores.errors import Gone
from stores.settings import get_settings
from stores.vectorstore import VectorStore, namespace_collections

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files "
    "(path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, doc_id TEXT, chunks INTEGER)",
    "CREATE TABLE IF NOT EXISTS superseded (doc_id TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS uploads (doc_id TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS replaced (doc_id TEXT PRIMARY KEY, path TEXT NOT NULL, by TEXT NOT NULL)",
)
"""The manifest's tables: files ingested, earlier versions queued, uploads, earlier versions replaced."""


def manifest_path(store: VectorStore) -> Path:
    """The manifest file of ``store`` (its folder created)."""
    folder = get_settings().home / "manifests"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{store.collection_name}.sqlite"


def open_manifest(path: Path) -> sqlite3.Connection:
    """A connection to manifest ``path``, its tables created."""
    db = sqlite3.connect(path, timeout=30)
    with db:
        for statement in SCHEMA:
            db.execute(statement)
    return db


def namespace_manifests(namespace: str) -> list[Path]:
    """The manifest files of ``namespace``: one per embedder's collection that has one."""
    folder = get_settings().home / "manifests"
    if not any(folder.glob("*.sqlite")):  # nothing ingested yet: the store is not even opened
        return []
    return [p for c in namespace_collections(namespace) if (p := folder / f"{c.name}.sqlite").exists()]


@contextlib.contextmanager
def manifests(namespace: str) -> Iterator[Iterator[sqlite3.Connection]]:
    """Each manifest of ``namespace`` opened in turn (its tables created), committed and closed after use."""

    def each() -> Iterator[sqlite3.Connection]:
        for path in namespace_manifests(namespace):
            db = open_manifest(path)
            with contextlib.closing(db), db:
                yield db

    yield each()


def record_upload(store: VectorStore, doc_id: str) -> None:
    """Record that ``doc_id`` was uploaded into ``store`` (sent as text or bytes): no file version may remove it."""
    with contextlib.closing(open_manifest(manifest_path(store))) as db, db:
        db.execute("INSERT OR IGNORE INTO uploads VALUES (?)", (doc_id,))


def owned_ids(namespace: str) -> tuple[set[str], set[str]]:
    """Ids ``namespace``'s files name now, and ids uploaded into it."""
    named: set[str] = set()
    uploaded: set[str] = set()
    with manifests(namespace) as each:
        for db in each:
            named |= {str(row[0]) for row in db.execute("SELECT DISTINCT doc_id FROM files")}
            uploaded |= {str(row[0]) for row in db.execute("SELECT doc_id FROM uploads")}
    return named, uploaded


def drop_owners(namespace: str, doc_id: str) -> None:
    """Forget every upload record of ``doc_id`` in ``namespace`` (the document is being forgotten)."""
    with manifests(namespace) as each:
        for db in each:
            db.execute("DELETE FROM uploads WHERE doc_id = ?", (doc_id,))


def replaced_by(namespace: str, doc_id: str) -> tuple[str, str] | None:
    """``(file, new id)`` when ``doc_id`` is an earlier version of a file of ``namespace`` (None: it is not)."""
    with manifests(namespace) as each:
        for db in each:
            row = db.execute("SELECT path, by FROM replaced WHERE doc_id = ?", (doc_id,)).fetchone()
            if row is not None:
                return str(row[0]), str(row[1])
    return None


def check_current(namespace: str, doc_ids: Iterable[str]) -> None:
    """:class:`~stores.errors.Gone` (410) naming the new version when one of ``doc_ids`` was removed as replaced."""
    for doc_id in doc_ids:
        if not doc_id or find_document(namespace, doc_id) is not None:
            continue
        found = replaced_by(namespace, doc_id)
        if found is not None:
            path, new = found
            raise Gone(
                f"document {doc_id!r} is an earlier version of the file {Path(path).name!r}, which changed and was "
                f"ingested again, and it has been removed; its current version is {new!r}: name doc_id {new!r}"
            )
