"""Retention: delete a thread, a document or a namespace, with everything kept about it.

- a **thread**: its checkpoints (every step, every pending write), its chat session's offloaded
  items, and its owner record on the server;
- a **document**: its records in every embedder's collection of the namespace (chunks of every
  index, canvas, offloaded items), its record and text (local files or the Chroma server's shared
  files), its cache folder, its lock file, and every thread whose checkpoints name it;
- a **namespace**: every document in it, its collections, folders and lock files, and every
  thread bound to it (by its checkpoints or its owner record).

``longdoc forget --thread ID | --doc ID [--namespace NS] | --namespace NS`` runs these.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import Any

from stores.checkpoint import open_checkpointer
from stores.documents import doc_dir, list_documents, lock_dir, namespace_dir
from stores.errors import InputError
from stores.offload import check_session
from stores.shared_files import shared_files
from stores.vectorstore import check_namespace, get_client, namespace_collections
from surfaces.access import ThreadOwners


def _threads_where(saver: Any, match: Any) -> list[str]:
    """Ids of the threads one of whose checkpoints has channel values ``match`` accepts."""
    found: dict[str, None] = {}
    for item in saver.list(None):
        thread = str(item.config["configurable"]["thread_id"])
        if thread not in found and match(item.checkpoint.get("channel_values") or {}):
            found[thread] = None
    return list(found)


def _forget_threads(saver: Any, threads: Iterable[str]) -> list[str]:
    owners = ThreadOwners()
    done = []
    for thread in threads:
        latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        values = (latest.checkpoint.get("channel_values") or {}) if latest is not None else {}
        session, namespace = values.get("session"), values.get("namespace")
        if session and namespace:
            for collection in namespace_collections(str(namespace)):
                collection.delete(where={"$and": [{"kind": "offload"}, {"session": check_session(str(session))}]})
        saver.delete_thread(thread)
        owners.forget(thread)
        done.append(thread)
    return done


def forget_thread(thread_id: str) -> dict[str, Any]:
    """Delete thread ``thread_id``: checkpoints, chat session items, owner record."""
    if not thread_id:
        raise InputError("give the id of the thread to forget")
    with open_checkpointer() as saver:
        return {"threads": _forget_threads(saver, [thread_id])}


def _drop_document(namespace: str, doc_id: str) -> None:
    folder = doc_dir(namespace, doc_id)
    for collection in namespace_collections(namespace):
        collection.delete(where={"doc_id": doc_id})
    shared = shared_files(namespace)
    if shared is not None:
        shared.collection.delete(where={"folder": doc_id})
    shutil.rmtree(folder, ignore_errors=True)
    (lock_dir(namespace) / f"{doc_id}.lock").unlink(missing_ok=True)


def forget_document(namespace: str, doc_id: str) -> dict[str, Any]:
    """Delete document ``doc_id`` of ``namespace``, and every thread whose checkpoints name it."""
    namespace = check_namespace(namespace)
    doc_dir(namespace, doc_id)  # checks the id
    with open_checkpointer() as saver:
        threads = _threads_where(
            saver, lambda v: v.get("doc_id") == doc_id and str(v.get("namespace") or namespace) == namespace
        )
        forgotten = _forget_threads(saver, threads)
    _drop_document(namespace, doc_id)
    return {"documents": [doc_id], "threads": forgotten}


def forget_namespace(namespace: str) -> dict[str, Any]:
    """Delete namespace ``namespace``: its documents, collections, folders and threads."""
    namespace = check_namespace(namespace)
    docs = [info.doc_id for info in list_documents(namespace)]
    with open_checkpointer() as saver:
        named = set(_threads_where(saver, lambda v: v.get("namespace") == namespace))
        owned = set(ThreadOwners().in_namespace(namespace))
        forgotten = _forget_threads(saver, sorted(named | owned))
    for doc_id in docs:
        _drop_document(namespace, doc_id)
    client = get_client()
    for collection in namespace_collections(namespace):
        client.delete_collection(collection.name)
    if shared_files(namespace) is not None:
        client.delete_collection(f"ld-{namespace}-files")
    shutil.rmtree(namespace_dir(namespace), ignore_errors=True)
    shutil.rmtree(lock_dir(namespace), ignore_errors=True)
    return {"documents": docs, "threads": forgotten}
