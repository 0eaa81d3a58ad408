"""The document registry: what was ingested, per namespace, addressed by content hash.

A document's chunks and vectors live in the Chroma store; its metadata, normalised text and
per-document caches (orderings, canvases...) live in ``LONGDOC_HOME/namespaces/NS/docs/DOC_ID``.
With a Chroma server (``LONGDOC_CHROMA_URL``) the metadata and text live there instead, so every
server instance sees every document; the caches stay local (each is rebuilt identically from the
shared chunks, or, for a canvas, read back from its store record).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stores.chroma_client import check_namespace
from stores.errors import InputError
from stores.extras import require_postgres
from stores.files import shown_source
from stores.settings import get_settings
from stores.shared_files import shared_files


@dataclass
class DocumentInfo:
    """Metadata of one ingested document."""

    doc_id: str
    namespace: str
    title: str
    source: str
    media_type: str
    language: str
    chunks: int
    sections: list[str] = field(default_factory=list)
    embedder: str = ""
    chunk_size: int = 0
    chunk_overlap: int = 0
    words: int = 0
    """Words of the normalised text (CJK characters count one each); 0 in records written before it was kept."""
    ingested_at: str = ""
    """When the index was published (UTC, ISO 8601); empty in records written before it was kept."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return asdict(self)


def index_identity(info: DocumentInfo) -> str:
    """Identity of a document's index: its content hash, chunker settings and embedder, as 16 hex digits.

    Re-ingesting the same text with another chunk size or embedder gives a new identity (and new
    chunk ids); an identical re-ingest keeps it. Everything derived from the chunks (Chow-Liu
    trees, canvases, cached expert answers, BM25 indexes, chat sessions citing ``[cN]``) is keyed
    by it, so it is never reused against chunks it was not made from.
    """
    parts = [info.doc_id, info.embedder, info.chunk_size, info.chunk_overlap]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:16]


def published_index(namespace: str, doc_id: str) -> str:
    """The :func:`index_identity` the document's record publishes; ``""`` when it has no record.

    Every chunk is stored with the identity of the build that wrote it (its ``index`` field), and
    readers only see the chunks of the published one: a build under way, or one that died, is
    invisible until the record switches to it.
    """
    info = find_document(namespace, doc_id)
    return index_identity(info) if info is not None else ""


@contextlib.contextmanager
def document_lock(namespace: str, doc_id: str) -> Iterator[None]:
    """Hold the index lock of one document: its ingests run one at a time.

    With ``LONGDOC_POSTGRES_URL`` set (the scale-out deployment) a PostgreSQL advisory lock, which
    holds across every instance sharing the database and the Chroma server; otherwise a file lock
    under ``LONGDOC_HOME``, which holds across the threads and processes of one machine.
    """
    doc_dir(namespace, doc_id)  # checks both names
    settings = get_settings()
    if settings.postgres_url:
        require_postgres()
        from stores.postgres import connect

        key = f"longdoc-index:{namespace}:{doc_id}"
        with connect(settings.postgres_url) as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
        return
    from filelock import FileLock

    path = lock_dir(namespace) / f"{doc_id}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path), thread_local=False):
        yield


def lock_dir(namespace: str) -> Path:
    """Folder of the namespace's document lock files (kept apart from the documents: a lock outlives a delete)."""
    return get_settings().home / "locks" / check_namespace(namespace)


def namespace_dir(namespace: str) -> Path:
    """Folder of ``namespace`` under ``LONGDOC_HOME``."""
    return get_settings().home / "namespaces" / check_namespace(namespace)


def doc_dir(namespace: str, doc_id: str) -> Path:
    """Folder holding one document's metadata and caches."""
    if not doc_id or not all(c.isalnum() or c in "-_" for c in doc_id):
        raise InputError(f"invalid document id {doc_id!r}")
    return namespace_dir(namespace) / "docs" / doc_id


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file of its own and an atomic replace.

    The temporary file is unique (``tempfile`` in the target folder), so concurrent writers of
    one path, threads or processes, never share it; readers see the old or the new content. A
    replaced file keeps its permissions; a new one gets ``rw-r--r--``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data if isinstance(data, bytes) else data.encode("utf-8")
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise


def save_document(info: DocumentInfo, text: str) -> None:
    """Record ``info`` and the document's normalised text (metadata last: it marks completion)."""
    folder = doc_dir(info.namespace, info.doc_id)
    shared = shared_files(info.namespace)
    if shared is not None:
        shared.put(info.doc_id, "text.txt", text)
        shared.put(info.doc_id, "meta.json", json.dumps(info.to_dict(), ensure_ascii=False))
        return
    write_atomic(folder / "text.txt", text)
    write_atomic(folder / "meta.json", json.dumps(info.to_dict(), ensure_ascii=False, indent=1))


def _document_file(namespace: str, doc_id: str, name: str) -> str:
    """File ``name`` of an ingested document (the shared files' when a Chroma server keeps them), or InputError."""
    path = doc_dir(namespace, doc_id) / name
    shared = shared_files(namespace)
    if shared is not None:
        found = shared.get(doc_id, name)
    else:
        found = path.read_text(encoding="utf-8") if path.exists() else None
    if found is None:
        raise InputError(f"document {doc_id!r} is not ingested in namespace {namespace!r}")
    return found


def get_document(namespace: str, doc_id: str) -> DocumentInfo:
    """Metadata of an ingested document, or InputError when it is unknown."""
    return _info(json.loads(_document_file(namespace, doc_id, "meta.json")))


def _info(record: dict[str, Any]) -> DocumentInfo:
    """A :class:`DocumentInfo` from a record (keys a later version added and this one does not know are left out)."""
    known = DocumentInfo.__dataclass_fields__
    return DocumentInfo(**{k: v for k, v in record.items() if k in known})


def find_document(namespace: str, doc_id: str) -> DocumentInfo | None:
    """Like :func:`get_document` but ``None`` when unknown."""
    try:
        return get_document(namespace, doc_id)
    except InputError:
        return None


def document_text(namespace: str, doc_id: str) -> str:
    """The normalised text of an ingested document."""
    return _document_file(namespace, doc_id, "text.txt")


def list_documents(namespace: str) -> list[DocumentInfo]:
    """Every document ingested in ``namespace``."""
    shared = shared_files(namespace)
    if shared is not None:
        return [_info(json.loads(text)) for text in shared.all_named("meta.json")]
    root = namespace_dir(namespace) / "docs"
    if not root.exists():
        return []
    out = []
    for meta in sorted(root.glob("*/meta.json")):
        out.append(_info(json.loads(meta.read_text(encoding="utf-8"))))
    return out


_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\s\u3400-\u9fff\uf900-\ufaff]+")


def count_words(text: str) -> int:
    """Words of ``text`` as a reader counts them.

    Runs of non-space characters holding a letter or digit (not markup such as ``#`` or ``-``), each CJK character
    one word.
    """
    return sum(1 for word in _WORD.findall(text) if any(c.isalnum() for c in word))


def now_iso() -> str:
    """The current UTC time, to the second, as ISO 8601 (``2026-12-03T07:57:00Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


DOCUMENT_COLUMNS = ("doc_id", "title", "source", "words", "chunks", "embedder", "ingested_at")
"""What a namespace's listing says of each document (``longdoc docs``, the served ``/documents``)."""


def document_listing(namespace: str) -> list[dict[str, Any]]:
    """The documents of ``namespace``, oldest first: :data:`DOCUMENT_COLUMNS` of each.

    A record written before words and ingest times were kept gets its words counted from its text
    and, in the local store, its time from the record's file.
    """
    rows = []
    for info in list_documents(namespace):
        row = {name: getattr(info, name) for name in DOCUMENT_COLUMNS}
        row["source"] = shown_source(info.source)
        if not info.words:
            with contextlib.suppress(InputError):
                row["words"] = count_words(document_text(namespace, info.doc_id))
        if not info.ingested_at and shared_files(namespace) is None:
            meta = doc_dir(namespace, info.doc_id) / "meta.json"
            with contextlib.suppress(OSError):
                stamp = datetime.fromtimestamp(meta.stat().st_mtime, UTC)
                row["ingested_at"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append(row)
    return sorted(rows, key=lambda r: (r["ingested_at"], r["doc_id"]))


def cache_path(namespace: str, doc_id: str, name: str) -> Path:
    """Path of a per-document cache file ``name`` (the folder is created)."""
    folder = doc_dir(namespace, doc_id) / "cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name
