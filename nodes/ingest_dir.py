"""Ingesting a directory: every supported file under it, parsing the next file while this one embeds.

A manifest per (namespace, vector space) under ``LONGDOC_HOME/manifests`` remembers each file's
size, modification time and document id; a file whose size and time are unchanged and whose
document is still fully indexed is skipped without being read. A run cut short resumes: finished
files are skipped, and the file it stopped in keeps the chunks it had written
(:func:`nodes.ingest.embed_records`). A file that cannot be read is reported and the others go on.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.ingest import IngestResult, Progress, index_document, is_indexed
from stores.documents import write_atomic
from stores.errors import InputError
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

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "files": len(self.indexed) + len(self.skipped) + len(self.failed),
            "indexed": self.indexed,
            "skipped": self.skipped,
            "failed": self.failed,
            "chunks": sum(int(item["chunks"]) for item in self.indexed + self.skipped),
        }


def document_files(root: Path, *, contained: bool = False) -> list[Path]:
    """Every file under ``root`` (recursively, hidden folders excluded) of a supported type, sorted.

    ``contained``: a file whose real path (links followed) is outside ``root`` is left out.
    """
    if not root.is_dir():
        raise InputError(f"{root}: not a directory")
    real = root.resolve()
    found = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if any(part.startswith(".") for part in parts) or not path.is_file():
            continue
        if contained and not path.resolve().is_relative_to(real):
            continue
        if path.suffix.lower() in SUPPORTED:
            found.append(path)
    return sorted(found)


class Manifest:
    """Size, modification time and document id of every file ingested into one store."""

    def __init__(self, store: VectorStore) -> None:
        self.path = get_settings().home / "manifests" / f"{store.collection_name}.json"
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}  # an unreadable manifest only costs re-reading the files

    @staticmethod
    def stamp(path: Path) -> dict[str, int]:
        """The file's size and modification time, to tell a changed file."""
        st = path.stat()
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def unchanged(self, path: Path, store: VectorStore, chunk_size: int, chunk_overlap: int) -> dict[str, Any] | None:
        """The manifest entry of ``path`` when the file is as recorded and its document still indexed."""
        entry = self.entries.get(str(path.resolve()))
        if entry is None or {k: entry.get(k) for k in ("size", "mtime_ns")} != self.stamp(path):
            return None
        info = is_indexed(store, str(entry["doc_id"]), chunk_size, chunk_overlap)
        return {**entry, "chunks": info.chunks} if info is not None else None

    def record(self, path: Path, result: IngestResult) -> None:
        """Record the file's ingest with its stamp, and save the manifest."""
        self.entries[str(path.resolve())] = {**self.stamp(path), "doc_id": result.doc_id, "chunks": result.chunks}
        write_atomic(self.path, json.dumps(self.entries, indent=1, sort_keys=True))


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

    ``contained``: files linked from outside ``root`` are left out.
    """
    emit = progress or (lambda _event: None)
    files = document_files(Path(root), contained=contained)
    store = get_store(namespace, embedder)
    manifest = Manifest(store)
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
                manifest.record(path, done)
                item = {"path": str(path), "doc_id": done.doc_id, "chunks": done.chunks, "cached": done.cached}
                result.indexed.append(item)
        finished = len(result.indexed) + len(result.skipped) + len(result.failed)
        emit({"stage": "files", "done": finished, "total": len(files), "postfix": path.name})
    return result
