"""Retention: delete a thread, a document or a namespace, with everything kept about it, and no copy left behind.

- a **thread**: its checkpoints (every step, every pending write), its chat session's offloaded
  items, its owner record on the server and its lock file;
- a **document**: its records in every embedder's collection of the namespace (chunks of every
  index, canvas, offloaded items), its record and text (local files or the Chroma server's shared
  files), its cache folder, its lock file, the canvases and cached expert answers of every collection
  that included it, and every thread whose checkpoints name it, whether it read the document alone or
  in a collection (:class:`Names`), with that thread's chat session's offloaded items;
- a **namespace**: every document in it, its collections, folders and lock files, and every
  thread bound to it (by its checkpoints or its owner record).

Deleting a row leaves copies of it in SQLite's write-ahead log and in free pages, and a record written
to the local Chroma store stays in Chroma's ``embeddings_queue`` until its vector index is saved, so every
forget ends with :func:`compact`: the forgotten records' entries in that queue lose their text, the
full-text index is merged, and the checkpoint, thread-owner and Chroma SQLite files are checkpointed
(``wal_checkpoint(TRUNCATE)``) and vacuumed. What was asked for and does not exist is an error
(:class:`NothingToForget`: exit code 2, HTTP 404); the report says what was deleted.

``longdoc forget --thread ID [--tenant NAME] | --doc ID [--namespace NS] | --namespace NS`` runs these as the
operator (``--thread`` finds a served thread stored under its tenant-prefixed id too); the servers' ``/forget``
routes run them for the caller's own tenant (:func:`forget_for_tenant`).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.owners import drop_owners
from stores.checkpoint import ThreadBusy, ThreadLock, busy_message, open_checkpointer, thread_lock_path
from stores.documents import doc_dir, find_document, list_documents, lock_dir, namespace_dir
from stores.errors import InputError
from stores.files import IngestRoot
from stores.offload import check_session
from stores.settings import get_settings
from stores.shared_files import shared_files
from stores.vectorstore import check_namespace, get_client, namespace_collections
from surfaces.access import Tenant, ThreadOwners, thread_key


class NothingToForget(InputError):
    """What forget was asked to delete does not exist (exit code 2, HTTP 404)."""

    status = 404


@dataclass
class Report:
    """What one forget deleted."""

    threads: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    checkpoints: int = 0
    """Checkpoints deleted (each step of each thread)."""
    records: int = 0
    """Chroma records deleted (chunks, canvases, offloaded items, shared files)."""
    files: int = 0
    """Files deleted under ``LONGDOC_HOME`` (a collection canvas that included a forgotten document among them)."""
    answers: int = 0
    """Cached expert answers deleted from the caches of collections that included a forgotten document."""
    compacted: list[str] = field(default_factory=list)
    """SQLite files checkpointed and vacuumed afterwards."""
    record_ids: list[str] = field(default_factory=list, repr=False)
    caches: list[Path] = field(default_factory=list, repr=False)
    """Cache files rows were deleted from, to compact with the rest."""

    def as_dict(self, shown: dict[str, str] | None = None) -> dict[str, Any]:
        """The report, threads named as ``shown`` maps them (a served thread by the id its caller knows)."""
        names = shown or {}
        return {
            "threads": [names.get(t, t) for t in self.threads],
            "documents": self.documents,
            "checkpoints": self.checkpoints,
            "records": self.records,
            "files": self.files,
            "answers": self.answers,
            "compacted": self.compacted,
        }


def _delete_records(collection: Any, where: dict[str, Any], report: Report, turns: bool = True) -> None:
    """Delete the records ``where`` selects into ``report``; ``turns=False`` leaves chat sessions' offloaded turns."""
    got = collection.get(where=where, include=[] if turns else ["metadatas"])
    metas = got.get("metadatas") or [{}] * len(got["ids"])
    ids = [i for i, meta in zip(got["ids"], metas, strict=True) if turns or (meta or {}).get("kind") != "offload"]
    if ids:
        collection.delete(ids=ids)
        report.records += len(ids)
        report.record_ids += ids


def _remove_tree(path: Path, report: Report) -> None:
    if path.exists():
        report.files += sum(1 for p in path.rglob("*") if p.is_file())
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def threads_held(threads: Iterable[str]) -> Iterator[None]:
    """Hold every thread about to be deleted.

    A thread whose run is still going is refused (409, exit 2) before anything is deleted.
    """
    held: list[ThreadLock] = []
    try:
        for thread in sorted(set(threads)):
            lock = ThreadLock(thread)
            if not lock.acquire():
                raise ThreadBusy(busy_message(thread))
            held.append(lock)
        yield
    finally:
        for lock in held:
            lock.release()


def _thread_exists(saver: Any, thread: str, owners: ThreadOwners) -> bool:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    found = saver.get_tuple(config) is not None or owners.owner(thread) is not None
    return found or owners.buried(thread) is not None


def forget_threads(saver: Any, threads: Iterable[str], report: Report) -> None:
    """Delete ``threads`` (checkpoints, offloaded items, owner records, lock files) into ``report``."""
    owners = ThreadOwners()
    for thread in threads:
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        latest = saver.get_tuple(config)
        values = (latest.checkpoint.get("channel_values") or {}) if latest is not None else {}
        session = values.get("session")
        if session:
            where = {"$and": [{"kind": "offload"}, {"session": check_session(str(session))}]}
            for collection in namespace_collections(namespace_of(values) or "default"):
                _delete_records(collection, where, report)
        report.checkpoints += sum(1 for _ in saver.list({"configurable": {"thread_id": thread}}))
        saver.delete_thread(thread)
        owners.forget(thread)
        lock = thread_lock_path(thread)
        if lock.exists():
            lock.unlink(missing_ok=True)
            report.files += 1
        report.threads.append(thread)


def namespace_of(values: Mapping[str, Any]) -> str:
    """The namespace a thread's channel values name: their own, their input's or the chat session's; "" for none."""
    for part in (values, values.get("__start__"), values.get("bound")):
        if isinstance(part, Mapping) and part.get("namespace"):
            return str(part["namespace"])
    return ""


def named_documents(values: Mapping[str, Any]) -> set[str]:
    """Ids of the documents a thread's channel values (or its input, or its chat session's binding) name.

    ``doc_id``, ``doc_ids``, ``collection`` (a run's resolved documents) and ``documents[].doc_id``.
    """
    found: set[str] = set()
    for part in (values, values.get("__start__"), values.get("bound")):
        if not isinstance(part, Mapping):
            continue
        if part.get("doc_id"):
            found.add(str(part["doc_id"]))
        for key in ("doc_ids", "collection"):
            if isinstance(part.get(key), list):
                found.update(str(d) for d in part[key])
        for item in part.get("documents") or []:
            if isinstance(item, Mapping) and item.get("doc_id"):
                found.add(str(item["doc_id"]))
    return found


@dataclass(frozen=True)
class Names:
    """Whether a thread's channel values (or a run's input or output) show it read document ``doc_id``.

    By id (:func:`named_documents`: alone or as a member of a collection), or by an input whose members
    included it: ``whole_namespace`` in its namespace, or a folder ``path`` holding its file.
    """

    namespace: str
    doc_id: str
    file: Path | None = None
    """The document's file, resolved (None for a text)."""

    @classmethod
    def document(cls, namespace: str, doc_id: str, source: str) -> Names:
        """Test for document ``doc_id`` of ``namespace`` read from file ``source``, relative to the ingest root."""
        return cls(namespace, doc_id, None if not source or source == "text" else _real_path(source))

    def __call__(self, values: Any) -> bool:
        """True when ``values`` name the document (in its namespace)."""
        if not isinstance(values, Mapping) or (namespace_of(values) or self.namespace) != self.namespace:
            return False
        if self.doc_id in named_documents(values):
            return True
        for part in (values, values.get("__start__")):
            if isinstance(part, Mapping) and (part.get("whole_namespace") is True or self._holds(part.get("path"))):
                return True
        return False

    def _holds(self, path: Any) -> bool:
        """Whether file or folder ``path`` is the document's file or holds it."""
        return bool(path) and self.file is not None and self.file.is_relative_to(_real_path(str(path)))


def _real_path(given: str) -> Path:
    """The real path of file or folder ``given`` (a relative one: in the ingest root, when there is one)."""
    path = Path(given).expanduser()
    root = IngestRoot.from_env().root
    return (root / path if not path.is_absolute() and root is not None else path).resolve()


def threads_where(
    saver: Any, match: Callable[[Mapping[str, Any]], bool], threads: Iterable[str] | None = None
) -> list[str]:
    """Ids of the threads (of ``threads``, else of all) one of whose checkpoints has channel values ``match`` accepts.

    Every checkpoint: an earlier turn of a thread may have read what its latest does not name.
    """
    found: dict[str, None] = {}
    for thread in [None] if threads is None else list(threads):
        config = None if thread is None else {"configurable": {"thread_id": thread}}
        for item in saver.list(config):
            name = str(item.config["configurable"]["thread_id"])
            if name not in found and match(item.checkpoint.get("channel_values") or {}):
                found[name] = None
    return list(found)


def drop_document(namespace: str, doc_id: str, report: Report, turns: bool = True) -> None:
    """Delete document ``doc_id`` of ``namespace`` (records, shared files, folder, lock file) into ``report``.

    ``turns=False`` keeps the chat turns offloaded under it: their threads stay (:func:`drop_superseded`).
    """
    for collection in namespace_collections(namespace):
        _delete_records(collection, {"doc_id": doc_id}, report, turns)
    shared = shared_files(namespace)
    if shared is not None:
        _delete_records(shared.collection, {"folder": doc_id}, report)
    _remove_tree(doc_dir(namespace, doc_id), report)
    from nodes.offload.collection_canvas import forget_collection_canvases
    from nodes.summarize.expert import AnswerCache

    report.files += forget_collection_canvases(namespace, doc_id)
    answers, cache = AnswerCache.forget_document(namespace, doc_id)
    report.answers += answers
    if answers:
        report.caches.append(cache)
    drop_owners(namespace, doc_id)
    lock = lock_dir(namespace) / f"{doc_id}.lock"
    if lock.exists():
        lock.unlink(missing_ok=True)
        report.files += 1
    report.documents.append(doc_id)


def _served_forms(thread_id: str, owners: ThreadOwners, tenant: str | None) -> list[str]:
    """``thread_id`` and the tenant-prefixed ids a server stored it under (:func:`surfaces.access.thread_key`)."""
    if tenant is not None:
        return [thread_key(tenant, thread_id)]
    return [thread_id, *owners.named(thread_id)]


def forget_thread(thread_id: str, tenant: str | None = None) -> dict[str, Any]:
    """Delete thread ``thread_id`` with checkpoints, chat session items, owner records and lock files.

    It deletes the thread of that id and every served thread a caller knows by it (or only tenant ``tenant``'s).
    """
    if not thread_id:
        raise InputError("give the id of the thread to forget")
    report = Report()
    owners = ThreadOwners()
    with open_checkpointer() as saver:
        found = [t for t in dict.fromkeys(_served_forms(thread_id, owners, tenant)) if _thread_exists(saver, t, owners)]
        if not found:
            whose = f" of tenant {tenant!r}" if tenant is not None else ""
            raise NothingToForget(f"no thread {thread_id!r}{whose} to forget (nor a served thread of that id)")
        with threads_held(found):
            forget_threads(saver, found, report)
    return compact(report)


def forget_document(namespace: str, doc_id: str, tenant: str | None = None) -> dict[str, Any]:
    """Delete document ``doc_id`` of ``namespace``, and every thread whose checkpoints name it, whoever's.

    In a namespace several tenants share, their threads that read it go too (their checkpoints hold its text):
    each served thread of another tenant (every tenant's, for the operator) is left a record that answers its
    next request with 410 saying why (:meth:`ThreadOwners.bury`). With ``tenant`` (a server's caller) the report
    names that tenant's threads and counts the others' (``others``).
    """
    namespace = check_namespace(namespace)
    doc_dir(namespace, doc_id)  # checks the id
    info = find_document(namespace, doc_id)
    if info is None:
        raise NothingToForget(f"no document {doc_id!r} in namespace {namespace!r} to forget")
    report = Report()
    owners = ThreadOwners()
    with open_checkpointer() as saver:
        threads = threads_where(saver, Names.document(namespace, doc_id, info.source))
        others = [t for t in threads if (owners.owner(t) or (tenant, ""))[0] != tenant]
        with threads_held(threads):
            forget_threads(saver, threads, report)
            drop_document(namespace, doc_id, report)
    reason = f"document {doc_id!r} of namespace {namespace!r}, which this thread read, was forgotten with it"
    for thread in others:  # served threads of other tenants: their next request is told why
        owners.bury(thread, reason)
    done = compact(report)
    if tenant is None:
        return done
    mine = [t for t in done["threads"] if t.startswith(thread_key(tenant, ""))]
    return {**done, "threads": mine, "others": len(done["threads"]) - len(mine)}


def drop_superseded(namespace: str, doc_id: str) -> dict[str, Any]:
    """Delete document ``doc_id``, an earlier version of a file of ``namespace``, keeping the threads that read it.

    They are kept whole, with the chat turns offloaded under it. Their next run that reads it is told the current
    version (:func:`nodes.owners.check_current`, 410); one whose run is still going keeps the version queued
    (:class:`~stores.checkpoint.ThreadBusy`) until it ends.
    """
    info = find_document(namespace, doc_id)
    if info is None:
        raise NothingToForget(f"no document {doc_id!r} in namespace {namespace!r} to forget")
    report = Report()
    names = Names.document(namespace, doc_id, info.source)
    with open_checkpointer() as saver, threads_held(threads_where(saver, names)):
        drop_document(namespace, doc_id, report, turns=False)
    return compact(report)


def forget_namespace(namespace: str) -> dict[str, Any]:
    """Delete namespace ``namespace``: its documents, collections, folders and threads."""
    namespace = check_namespace(namespace)
    docs = [info.doc_id for info in list_documents(namespace)]
    collections = namespace_collections(namespace)
    owners = ThreadOwners()
    report = Report()
    with open_checkpointer() as saver:
        named = set(threads_where(saver, lambda v: namespace_of(v) == namespace))
        threads = sorted(named | set(owners.in_namespace(namespace)))
        if not (docs or collections or threads or namespace_dir(namespace).exists()):
            raise NothingToForget(f"no namespace {namespace!r} to forget")
        with threads_held(threads):
            forget_threads(saver, threads, report)
            for doc_id in docs:
                drop_document(namespace, doc_id, report)
    client = get_client()
    for collection in namespace_collections(namespace):
        report.records += collection.count()
        client.delete_collection(collection.name)
    if shared_files(namespace) is not None:
        client.delete_collection(f"ld-{namespace}-files")
    _remove_tree(namespace_dir(namespace), report)
    _remove_tree(lock_dir(namespace), report)
    return compact(report)


def forget_for_tenant(tenant: Tenant, request: dict[str, Any], owners: ThreadOwners | None = None) -> dict[str, Any]:
    """A server caller's forget: its own thread, or a document of one of its namespaces.

    The request is ``{"thread_id": ID}`` (its own thread of that id) or ``{"doc_id": ID, "namespace": NS}`` (a
    document of one of its namespaces, with every thread that read it, the other tenants' counted in the report's
    ``others``: :func:`forget_document`). Thread ids in the report are the ones the caller knows.
    """
    if not isinstance(request, dict) or sum(bool(request.get(k)) for k in ("thread_id", "doc_id")) != 1:
        raise InputError("send {'thread_id': ID} or {'doc_id': ID, 'namespace': NS}")
    if request.get("thread_id"):
        thread = str(request["thread_id"])
        key = thread_key(tenant.name, thread)
        report = forget_thread(thread, tenant=tenant.name) if tenant.name else forget_thread(thread)
        return {**report, "threads": [thread if t == key else t for t in report["threads"]]}
    namespace = tenant.namespace_for(str(request.get("namespace") or ""))
    report = forget_document(namespace, str(request["doc_id"]), tenant=tenant.name if tenant.name else None)
    prefix = thread_key(tenant.name, "")
    return {**report, "threads": [t.removeprefix(prefix) if tenant.name else t for t in report["threads"]]}


# --- no copy left behind ------------------------------------------------------------------------------------
def _sqlite_compact(path: Path, report: Report, prepare: Any = None) -> None:
    """Checkpoint ``path``'s write-ahead log into it and truncate the log, vacuum the file, truncate the log again.

    The vacuum frees pages and the unused space of pages rewritten.
    """
    if not path.exists():
        return
    with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
        if prepare is not None:
            prepare(db)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    report.compacted.append(path.name)


def _scrub_chroma_queue(ids: list[str]) -> Any:
    """Strip the forgotten records' text and metadata from Chroma's log, then merge the full-text index without them.

    Chroma keeps each write in ``embeddings_queue`` (its log) until its vector index is saved, and has no call to
    purge it, so the forgotten records' entries lose their text and metadata here (their ids and vectors stay, so a
    replay of the log still ends with the records deleted); then the full-text index is merged without them.
    """

    def scrub(db: sqlite3.Connection) -> None:
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ", ".join("?" * len(batch))
            db.execute(f"UPDATE embeddings_queue SET metadata = NULL WHERE id IN ({marks})", batch)
        with contextlib.suppress(sqlite3.Error):  # a Python SQLite without the trigram tokenizer cannot open it
            db.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('optimize')")

    return scrub


def is_vector_index_file(path: Path, home: Path) -> bool:
    """Whether ``path`` is one of the local Chroma store's vector index files (``chroma/<segment>/*.bin``).

    Chroma writes them from memory buffers whose unused part holds whatever its process's memory held.
    """
    parts = path.relative_to(home).parts
    return len(parts) == 3 and parts[0] == "chroma" and path.suffix == ".bin"


def compact(report: Report) -> dict[str, Any]:
    """Leave no copy of what ``report`` deleted in the SQLite files under ``LONGDOC_HOME`` (see the module).

    Returns the report as a dict. PostgreSQL and a Chroma server keep their own files: see docs/security.md.
    """
    settings = get_settings()
    home = settings.home
    if not settings.postgres_url:
        _sqlite_compact(home / "checkpoints.sqlite", report)
        _sqlite_compact(home / "server_threads.sqlite", report)
    if not settings.chroma_url:
        _sqlite_compact(home / "chroma" / "chroma.sqlite3", report, _scrub_chroma_queue(report.record_ids))
    for cache in dict.fromkeys(report.caches):
        _sqlite_compact(cache, report)
    return report.as_dict()


__all__ = [
    "Names",
    "NothingToForget",
    "Report",
    "compact",
    "drop_document",
    "drop_superseded",
    "forget_document",
    "forget_for_tenant",
    "forget_namespace",
    "forget_thread",
    "forget_threads",
    "is_vector_index_file",
    "named_documents",
    "namespace_of",
    "threads_held",
    "threads_where",
]
