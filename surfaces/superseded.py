"""Removing the earlier version of a file ingested again with other content.

When a file (of a folder, or named alone by ``path``) is ingested again and its content changed, the manifest
queues the id of its earlier version (:mod:`nodes.ingest_dir`). :func:`retire_superseded` forgets each queued
version that no file of the namespace names any more, as ``longdoc forget --doc`` would
(:func:`surfaces.retention.forget_document`): its records in every embedder's collection (chunks, canvas,
offloaded items), its record and text, its cache folder, every thread whose checkpoints name it, and then the
SQLite files are compacted, so no copy of a sentence the file no longer holds is left under ``LONGDOC_HOME``.

The command line retires a namespace's queue after every ingest and every command that ingests a ``path``, the
LangServe app after every run, the Aegra deployment (:func:`deploy.app.retire_on_aegra`) after every run once its
thread is free, and ``langgraph dev`` (:mod:`deploy.dev`) after every run it answers. A run still going on a
thread that read the earlier version keeps it: its thread is busy, so the version stays queued (``kept``) and is
removed after that run ends, by the next ingest or run; meanwhile no workflow reads it as part of its namespace
(``whole_namespace`` leaves the queue out) and no listing shows it (:func:`surfaces.listing.namespace_listing`).
A run with no thread (nothing of it is kept) that reads the earlier version as it is removed finds none of its
passages from then on, and stops with "document ... is not ingested" where it next reads the document's record or
text; it writes nothing to the document, so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodes.ingest_dir import settle_superseded, superseded_documents
from stores.checkpoint import ThreadBusy
from surfaces.retention import NothingToForget, forget_document


def retire_superseded(namespace: str, forget: Callable[[str, str], Any] = forget_document) -> dict[str, Any]:
    """Forget the queued earlier versions of ``namespace``'s files: the ids removed, and the ones a run holds.

    ``forget(namespace, doc_id)`` removes one, raising :class:`surfaces.retention.NothingToForget` when it is gone
    and :class:`stores.checkpoint.ThreadBusy` when a run holds a thread that read it (the Aegra deployment passes its
    own, which removes the threads and run records it keeps in PostgreSQL). Returns
    ``{"superseded": [...], "kept": [...]}``.
    """
    removed: list[str] = []
    gone: list[str] = []
    kept: list[str] = []
    for doc_id in superseded_documents(namespace):
        try:
            forget(namespace, doc_id)
        except NothingToForget:
            gone.append(doc_id)  # forgotten already
        except ThreadBusy:
            kept.append(doc_id)
        else:
            removed.append(doc_id)
    settle_superseded(namespace, removed + gone)
    return {"superseded": removed, "kept": kept}
