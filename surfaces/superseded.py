"""Removing the earlier version of a file ingested again with other content.

When a file (of a folder, or named alone by ``path``) is ingested again and its content changed, the manifest
queues the id of its earlier version (:mod:`nodes.ingest_dir`). :func:`retire_superseded` removes each queued
version that nothing owns any more (no file of the namespace names it, nobody uploaded its content:
:mod:`nodes.owners`): its records in every embedder's collection (chunks, canvas, offloaded items), its record and
text, its cache folder and the caches of collections that included it, and then the SQLite files are compacted
(:func:`surfaces.retention.drop_superseded`). A document someone uploaded (as text, bytes or a chat attachment) is
never removed this way, whatever its content, nor is a file of another path with the same content.

The threads that read the earlier version are kept, whoever's they are: their checkpoints are their own record of
what they read. A next run of one that reads that version is refused with 410 naming the file and its current
version (:func:`nodes.owners.check_current`); naming the new version goes on in the same thread.

The command line retires a namespace's queue after every ingest and every command that ingests a ``path``, the
LangServe app after every run, the Aegra deployment (:func:`deploy.app.retire_on_aegra`) after every run once its
thread is free, and ``langgraph dev`` (:mod:`deploy.dev`) after every run it answers. Nothing is removed while a run
reads the namespace: LangServe and Aegra runs, stateless ones included, command-line runs and the ``langgraph dev``
runs a request waits for hold it (:func:`stores.readers.reading`) and the removal
waits for none of them (the versions stay queued, ``kept``, for the next retirement); a checkpointed run still going
on a thread that read the earlier version keeps it too (its thread is busy). Meanwhile no workflow reads a queued
version as part of its namespace (``whole_namespace`` leaves the queue out) and no listing shows it
(:func:`surfaces.listing.namespace_listing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodes.ingest_dir import settle_superseded, superseded_documents
from stores.checkpoint import ThreadBusy
from stores.readers import alone
from surfaces.retention import NothingToForget, drop_superseded


def retire_superseded(namespace: str, drop: Callable[[str, str], Any] = drop_superseded) -> dict[str, Any]:
    """Remove the queued earlier versions of ``namespace``'s files: the ids removed, and the ones kept.

    ``drop(namespace, doc_id)`` removes one, raising :class:`surfaces.retention.NothingToForget` when it is gone
    and :class:`stores.checkpoint.ThreadBusy` when a run holds a thread that read it (``langgraph dev`` passes its
    own, which asks its server). While any run reads the namespace every queued version is kept. Returns
    ``{"superseded": [...], "kept": [...]}``.
    """
    queued = superseded_documents(namespace)
    if not queued:
        return {"superseded": [], "kept": []}
    removed: list[str] = []
    gone: list[str] = []
    kept: list[str] = []
    with alone(namespace) as free:
        for doc_id in queued if free else []:
            try:
                drop(namespace, doc_id)
            except NothingToForget:
                gone.append(doc_id)  # forgotten already
            except ThreadBusy:
                kept.append(doc_id)
            else:
                removed.append(doc_id)
    settle_superseded(namespace, removed + gone)
    return {"superseded": removed, "kept": kept if free else queued}
