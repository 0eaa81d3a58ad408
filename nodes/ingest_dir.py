"""Ingesting a directory: every supported file under it, parsing the next file while this one embeds.

The folder's files are counted first: one holding more than ``LONGDOC_MAX_DOCUMENTS`` supported files
is refused (:class:`~stores.errors.TooLarge`) before any file is read, so nothing is ingested. A
manifest per (namespace, vector space), an SQLite table under ``LONGDOC_HOME/manifests``, remembers
each file's size, modification time and document id, one row written as each file is done; a file
whose size and time are unchanged and whose document is still fully indexed is skipped without being
read. A file ingested again with other content supersedes its earlier version: the old document's id
is queued in the manifest (``superseded``) until nothing owns it any more (no file of the namespace
names it, nobody uploaded its content: :mod:`nodes.owners`), and then the document is removed
(:func:`superseded_documents`, removed by :mod:`surfaces.superseded`); a queued id is never read as part
of a namespace meanwhile. A run cut
short resumes: finished files are skipped, and the file it stopped in keeps the chunks it had written
(:func:`nodes.ingest.embed_records`). A file that cannot be read is reported and the others go on.

Every surface ingests a folder (and records a file) through :func:`ingest_folder` and :func:`ingest_file`: the
ingest graph, the command line and the workflows' ``path`` inputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.ingest import IngestResult, Progress, index_document, is_indexed, read_source
from nodes.owners import manifest_path, manifests, open_manifest, owned_ids
from stores.errors import InputError, TooLarge
from stores.loaders import SUPPORTED, LoadedDocument, load_path
from stores.settings import get_settings
from stores.vectorstore import VectorStore, get_store

PREFETCH = 2
"""Files parsed ahead of the one being embedded (bounded, so a directory of large PDFs stays in memory bounds)."""


@dataclass
class DirectoryResult:
    """What a directory ingest did, file by file."""

    indexed: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    """Ids of earlier versions of the files ingested again with other content."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "files": len(self.indexed) + len(self.skipped) + len(self.failed),
            "indexed": self.indexed,
            "skipped": self.skipped,
            "failed": self.failed,
            "chunks": sum(int(item["chunks"]) for item in self.indexed + self.skipped),
            "superseded": self.superseded,
        }


def too_many_files(root: Path, limit: int) -> TooLarge:
    """The refusal of a folder holding more than ``limit`` supported files."""
    return TooLarge(
        f"{root}: the folder holds more than {limit:,} document files, over the {limit:,} one run may read "
        "(LONGDOC_MAX_DOCUMENTS); name a smaller folder"
    )


def document_files(root: Path, *, contained: bool = False, limit: int | None = None) -> list[Path]:
    """Every file under ``root`` (recursively, hidden folders excluded) of a supported type, sorted.

    ``contained``: a file whose real path (links followed) is outside ``root`` is left out. ``limit``: past
    that many files the walk stops and the folder is refused (:func:`too_many_files`), none of them read.
    ``os.walk`` rather than ``Path.rglob``: it leaves hidden folders unwalked instead of listing them.
    """
    if not root.is_dir():
        raise InputError(f"{root}: not a directory")
    real = root.resolve()
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(folder, name)
            if name.startswith(".") or path.suffix.lower() not in SUPPORTED or not path.is_file():
                continue
            if contained and not path.resolve().is_relative_to(real):
                continue
            found.append(path)
            if limit is not None and len(found) > limit:
                raise too_many_files(root, limit)
    return sorted(found)


class Manifest:
    """Size, modification time and document id of every file ingested into one store: a table of its own.

    One row is written per file as it is done (not the whole manifest rewritten), so a folder of many
    files costs one small write each. A manifest left as JSON by an earlier version is taken over once.
    """

    def __init__(self, store: VectorStore) -> None:
        self.path = manifest_path(store)
        self.db = open_manifest(self.path)
        self._take_over(self.path.with_suffix(".json"))

    def _take_over(self, old: Path) -> None:
        """Move the entries of an earlier version's JSON manifest into the table, then remove the file."""
        try:
            entries = json.loads(old.read_text())
        except (OSError, ValueError):
            return  # none, or unreadable: that only costs re-reading the files
        rows = [
            (path, e.get("size"), e.get("mtime_ns"), str(e.get("doc_id", "")), int(e.get("chunks", 0)))
            for path, e in entries.items()
            if isinstance(e, dict)
        ]
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO files VALUES (?, ?, ?, ?, ?)", rows)
        old.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the table."""
        self.db.close()

    @staticmethod
    def stamp(path: Path) -> dict[str, int]:
        """The file's size and modification time, to tell a changed file."""
        st = path.stat()
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def entry(self, path: Path) -> dict[str, Any] | None:
        """The recorded row of ``path`` (None: never ingested)."""
        row = self.db.execute(
            "SELECT size, mtime_ns, doc_id, chunks FROM files WHERE path = ?", (str(path.resolve()),)
        ).fetchone()
        return None if row is None else dict(zip(("size", "mtime_ns", "doc_id", "chunks"), row, strict=True))

    def unchanged(self, path: Path, store: VectorStore, chunk_size: int, chunk_overlap: int) -> dict[str, Any] | None:
        """The manifest entry of ``path`` when the file is as recorded and its document still indexed."""
        entry = self.entry(path)
        if entry is None or {k: entry.get(k) for k in ("size", "mtime_ns")} != self.stamp(path):
            return None
        info = is_indexed(store, str(entry["doc_id"]), chunk_size, chunk_overlap)
        return {**entry, "chunks": info.chunks} if info is not None else None

    def record(self, path: Path, result: IngestResult) -> str | None:
        """Record the file's ingest with its stamp (one row written); the id of the version it supersedes, if any.

        The superseded id is queued (table ``superseded``) and recorded as replaced by the new one (``replaced``,
        :mod:`nodes.owners`); a version ingested again leaves the queue and is current again.
        """
        stamp, key = self.stamp(path), str(path.resolve())
        values = (key, stamp["size"], stamp["mtime_ns"], result.doc_id, result.chunks)
        with self.db:
            row = self.db.execute("SELECT * FROM files WHERE path = ?", (key,)).fetchone()
            if row is not None and tuple(row) == values:
                return None  # recorded as it is: nothing written
            self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", values)
            self.db.execute("DELETE FROM superseded WHERE doc_id = ?", (result.doc_id,))
            self.db.execute("DELETE FROM replaced WHERE doc_id = ?", (result.doc_id,))
            old = str(row[3]) if row is not None and row[3] and row[3] != result.doc_id else None
            if old is not None:
                self.db.execute("INSERT OR IGNORE INTO superseded VALUES (?)", (old,))
                self.db.execute("INSERT OR REPLACE INTO replaced VALUES (?, ?, ?)", (old, key, result.doc_id))
        return old


def superseded_documents(namespace: str) -> list[str]:
    """Ids of earlier versions of files in ``namespace`` that nothing owns now (:mod:`nodes.owners`).

    No file of any of its manifests names them and none was uploaded (as text or bytes, whatever its
    content's source was). The documents to remove (:mod:`surfaces.superseded`), and to leave out of a
    namespace's reading meanwhile.
    """
    queued: set[str] = set()
    with manifests(namespace) as each:
        for db in each:
            queued |= {str(row[0]) for row in db.execute("SELECT doc_id FROM superseded")}
    named, uploaded = owned_ids(namespace)
    return sorted(queued - named - uploaded)


def settle_superseded(namespace: str, doc_ids: Iterable[str]) -> None:
    """Take ``doc_ids`` off the superseded queues of ``namespace``'s manifests (removed, or gone already)."""
    drop = [(d,) for d in doc_ids]
    with manifests(namespace) as each:
        for db in each:
            db.executemany("DELETE FROM superseded WHERE doc_id = ?", drop)


def _parsed(paths: list[Path], encoding: str | None) -> Iterator[tuple[Path, LoadedDocument | InputError]]:
    """``(path, document or its error)`` for each path, parsed by a reader thread ``PREFETCH`` files ahead."""
    out: queue.Queue[tuple[Path, LoadedDocument | InputError] | None] = queue.Queue(maxsize=PREFETCH)
    stop = threading.Event()

    def read() -> None:
        for path in paths:
            if stop.is_set():
                break
            try:
                item: LoadedDocument | InputError = load_path(path, encoding)
            except InputError as exc:
                item = exc
            out.put((path, item))
        out.put(None)

    reader = threading.Thread(target=read, name="ingest-reader", daemon=True)
    reader.start()
    try:
        while (got := out.get()) is not None:
            yield got
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting on a full queue
            with contextlib.suppress(queue.Empty):
                out.get(timeout=0.1)


def ingest_directory(
    root: str | Path,
    *,
    namespace: str = "default",
    embedder: str | None = None,
    chunk_size: int = 900,
    chunk_overlap: int = 150,
    encoding: str | None = None,
    progress: Progress | None = None,
    contained: bool = False,
) -> DirectoryResult:
    """Ingest every supported file under ``root`` into ``namespace``, skipping files unchanged since last time.

    ``contained``: files linked from outside ``root`` are left out. A folder of more than
    ``LONGDOC_MAX_DOCUMENTS`` supported files is refused before any is read (:class:`~stores.errors.TooLarge`).
    """
    emit = progress or (lambda _event: None)
    files = document_files(Path(root), contained=contained, limit=get_settings().max_documents)
    store = get_store(namespace, embedder)
    with contextlib.closing(Manifest(store)) as manifest:
        return _ingest_files(files, store, manifest, chunk_size, chunk_overlap, encoding, emit)


def _ingest_files(
    files: list[Path],
    store: VectorStore,
    manifest: Manifest,
    chunk_size: int,
    chunk_overlap: int,
    encoding: str | None,
    emit: Progress,
) -> DirectoryResult:
    """Ingest ``files`` into ``store``, skipping those the manifest knows unchanged, recording each one done."""
    result = DirectoryResult()
    todo = []
    for path in files:
        entry = manifest.unchanged(path, store, chunk_size, chunk_overlap)
        if entry is None:
            todo.append(path)
        else:
            result.skipped.append({"path": str(path), "doc_id": entry["doc_id"], "chunks": entry["chunks"]})
    emit({"stage": "files", "done": len(result.skipped), "total": len(files), "postfix": "unchanged skipped"})
    for path, doc in _parsed(todo, encoding):
        if isinstance(doc, InputError):
            result.failed.append({"path": str(path), "error": str(doc)})
        else:
            try:
                done = index_document(doc, store, chunk_size=chunk_size, chunk_overlap=chunk_overlap, progress=emit)
            except InputError as exc:
                result.failed.append({"path": str(path), "error": str(exc)})
            else:
                old = manifest.record(path, done)
                result.superseded += [old] if old is not None else []
                item = {"path": str(path), "doc_id": done.doc_id, "chunks": done.chunks, "cached": done.cached}
                result.indexed.append(item)
        finished = len(result.indexed) + len(result.skipped) + len(result.failed)
        emit({"stage": "files", "done": finished, "total": len(files), "postfix": path.name})
    return result


def ingest_folder(
    path: str | Path, namespace: str, context: Any, progress: Progress | None = None, encoding: str | None = None
) -> DirectoryResult:
    """Ingest folder ``path`` into ``namespace`` with a run context's embedder and chunking.

    Links leading out of the folder are left out (a folder inside a server's ingest root reads nothing outside it).
    """
    return ingest_directory(
        path,
        namespace=namespace,
        embedder=context.embedder,
        chunk_size=context.chunk_size,
        chunk_overlap=context.chunk_overlap,
        encoding=encoding,
        progress=progress,
        contained=True,
    )


def ingest_file(
    path: str | Path,
    namespace: str,
    context: Any,
    progress: Progress | None = None,
    *,
    title: str = "",
    encoding: str | None = None,
) -> tuple[IngestResult, str | None]:
    """Ingest file ``path`` with a run context's embedder and chunking and record it in the manifest.

    Returns the result and the id of the earlier version of the file it supersedes (None: none).
    """
    doc = read_source(path=str(path), title=title, encoding=encoding)
    store = get_store(namespace, context.embedder)
    done = index_document(
        doc, store, chunk_size=context.chunk_size, chunk_overlap=context.chunk_overlap, progress=progress
    )
    with contextlib.closing(Manifest(store)) as manifest:
        return done, manifest.record(Path(path), done)
