"""Which documents a run reads: one, a list, a whole namespace or a folder (see :mod:`nodes.collection`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodes.ingest import DOCUMENT_FIELDS, Progress, document_field, input_namespace, resolve_document
from nodes.ingest_dir import ingest_file, ingest_folder, superseded_documents
from nodes.owners import check_current
from stores.documents import cache_path, find_document, get_document, index_identity, list_documents, namespace_dir
from stores.errors import InputError, TooLarge
from stores.files import shown_source
from stores.labels import tagged
from stores.settings import get_settings
from stores.vectorstore import VectorStore, get_store

COLLECTION_FIELDS = ("doc_ids", "whole_namespace")
"""The input fields that name a collection (besides a folder ``path``)."""


@dataclass(frozen=True)
class Member:
    """One document of a run's collection and the tag its labels carry."""

    tag: int
    doc_id: str
    title: str
    source: str
    chunks: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {"tag": self.tag, "doc_id": self.doc_id, "title": self.title, "source": shown_source(self.source)}

    @property
    def name(self) -> str:
        """How outputs name the document: its title, else its file name, else its id."""
        return self.title or (Path(self.source).name if self.source not in ("", "text") else "") or self.doc_id


def source_field(values: Mapping[str, Any]) -> str | None:
    """Which input field names the run's documents (None: none does); several is an InputError."""
    given = [name for name in (*DOCUMENT_FIELDS, *COLLECTION_FIELDS) if values.get(name)]
    if len(given) > 1 and set(given) <= set(DOCUMENT_FIELDS):
        document_field(values)  # the one-document rule's own message
    if len(given) > 1:
        listed = ", ".join(DOCUMENT_FIELDS + COLLECTION_FIELDS[:1]) + f" or {COLLECTION_FIELDS[-1]}"
        raise InputError(f"give exactly one of {listed} to name the documents, not {' and '.join(given)}")
    return given[0] if given else None


def resolve_documents(values: Mapping[str, Any], context: Any, progress: Progress | None = None) -> list[str]:
    """The ids of the documents a workflow's input names, in order (one for a one-document input).

    ``doc_ids``: each must be ingested in the input's namespace with the run's embedder (unknown
    ones are named in the error); ``whole_namespace``: every such document of the namespace (but the
    earlier versions of files ingested again, :func:`nodes.ingest_dir.superseded_documents`); a
    folder ``path``: its new and changed files are ingested first, then all of its documents are
    taken (files that cannot be read are reported as progress messages; links leading out of the
    folder are left out, so a folder inside a server's ingest root reads nothing outside it); a file ``path`` is
    ingested and recorded in the manifest (:func:`nodes.ingest_dir.ingest_file`). Anything else is one
    document (:func:`nodes.ingest.resolve_document`). A named earlier version of a file, removed since, is
    :class:`~stores.errors.Gone` naming the current one (:func:`nodes.owners.check_current`).
    """
    name = source_field(values)
    namespace = input_namespace(values, context)
    store = get_store(namespace, context.embedder)
    if name == "doc_ids":
        return _listed(values["doc_ids"], namespace, store)
    if name == "doc_id":
        check_current(namespace, [str(values["doc_id"])])
    if name == "whole_namespace":
        if values["whole_namespace"] is not True:
            raise InputError("whole_namespace takes true (every document of the namespace) or is left out")
        old = set(superseded_documents(namespace))
        docs = [i.doc_id for i in list_documents(namespace) if i.embedder == store.space and i.doc_id not in old]
        if not docs:
            raise InputError(f"namespace {namespace!r} holds no document indexed with the {store.space!r} embedder")
        return _bounded(docs)
    if name == "path" and Path(str(values["path"])).expanduser().is_dir():
        return _folder(str(values["path"]), namespace, context, progress)
    if name == "path":
        return [ingest_file(str(values["path"]), namespace, context, progress)[0].doc_id]
    return [resolve_document(values, context, progress)]


def _bounded(doc_ids: list[str]) -> list[str]:
    """``doc_ids``, or :class:`TooLarge` when they are more than a run may read (a bound on the request)."""
    most = get_settings().max_documents
    if len(doc_ids) > most:
        raise TooLarge(f"{len(doc_ids):,} documents is over the {most:,} a run may read (LONGDOC_MAX_DOCUMENTS)")
    return doc_ids


def _listed(given: Any, namespace: str, store: VectorStore) -> list[str]:
    """``doc_ids`` checked: a non-empty list of ids, each ingested in ``namespace`` in the store's vector space."""
    if isinstance(given, str) or not isinstance(given, Sequence) or not all(isinstance(d, str) for d in given):
        raise InputError("doc_ids takes a list of document ids")
    docs = _bounded(list(dict.fromkeys(d.strip() for d in given if d.strip())))
    if not docs:
        raise InputError("doc_ids is empty: name at least one document")
    check_current(namespace, docs)
    unknown = [d for d in docs if find_document(namespace, d) is None]
    if unknown:
        shown = ", ".join(repr(d) for d in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise InputError(f"not ingested in namespace {namespace!r}: {shown}")
    other = [d for d in docs if get_document(namespace, d).embedder != store.space]
    if other:
        raise InputError(
            f"{other[0]!r} is indexed with another embedder than {store.space!r}; ingest it again with this one"
        )
    return docs


def _folder(path: str, namespace: str, context: Any, progress: Progress | None) -> list[str]:
    """Ingest what is new under folder ``path`` and return the ids of all of its documents, in file order."""
    emit = progress or (lambda _event: None)
    result = ingest_folder(path, namespace, context, emit)
    for item in result.failed:
        emit({"stage": "ingest", "message": f"left out {Path(item['path']).name}: {item['error']}"})
    by_path = {item["path"]: item["doc_id"] for item in result.indexed + result.skipped}
    docs = list(dict.fromkeys(by_path[p] for p in sorted(by_path)))
    if not docs:
        raise InputError(f"{path}: no readable document in the folder")
    return _bounded(docs)


def collection_version(namespace: str, doc_ids: Sequence[str]) -> str:
    """A digest of the documents and the index each publishes: what per-collection caches are keyed by."""
    parts = [[d, index_identity(get_document(namespace, d))] for d in doc_ids]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def collections_dir(namespace: str) -> Path:
    """The folder of ``namespace``'s per-collection caches (canvases, answers)."""
    return namespace_dir(namespace) / "collections"


def cache_file(namespace: str, doc_ids: Sequence[str], name: str) -> Path:
    """Where a run over ``doc_ids`` keeps the cache file ``name`` (its folder created).

    One document's: in its own cache folder, which goes with it; a collection's: in :func:`collections_dir`, its
    entries naming their documents.
    """
    if len(doc_ids) == 1:
        return cache_path(namespace, doc_ids[0], name)
    folder = collections_dir(namespace)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def members(namespace: str, doc_ids: Sequence[str], tags: Mapping[str, int] | None = None) -> list[Member]:
    """The documents of a run in the order given, tagged as ``tags`` says (default: 1, 2, ... in that order)."""
    tags = thread_tags(tags or {}, doc_ids)
    out = []
    for doc_id in doc_ids:
        info = get_document(namespace, doc_id)
        out.append(Member(tags[doc_id], doc_id, info.title, info.source, info.chunks))
    return out


def thread_tags(known: Mapping[str, int], doc_ids: Sequence[str]) -> dict[str, int]:
    """A thread's tags with those of ``doc_ids``: a document it has read keeps its tag, a new one takes the next."""
    tags = {str(doc_id): int(tag) for doc_id, tag in known.items()}
    for doc_id in doc_ids:
        tags.setdefault(doc_id, max(tags.values(), default=0) + 1)
    return tags


def label_tags(doc_ids: Sequence[str], tags: Mapping[str, int]) -> dict[str, int]:
    """The tag each document's labels carry in a run over ``doc_ids``.

    Its thread tag (``2:c3``) when the run reads several documents; none when it reads one (``c3``: there is no
    other document to tell it from).
    """
    return {doc_id: tags[doc_id] for doc_id in doc_ids if doc_id in tags} if len(doc_ids) > 1 else {}


def run_label(shown: Mapping[str, int], doc_id: str, label: str) -> str:
    """Chunk or sentence ``label`` of ``doc_id`` as a run writes it (``shown``: :func:`label_tags`)."""
    return tagged(shown[doc_id], label) if doc_id in shown else label


def run_documents(state: Mapping[str, Any], context: Any, progress: Progress | None = None) -> list[str]:
    """The ids of the documents a run of a thread reads (:func:`resolve_documents` of its input).

    A thread's state keeps the last run's ``doc_id`` (the output of a one-document run) beside the next run's
    input: that ``doc_id`` names nothing when the input names documents otherwise (a ``path``, ``doc_ids``...),
    so a new input replaces the documents of the last run. An input naming none reads the last run's documents.
    """
    values = dict(state)
    last = [str(d["doc_id"]) for d in state.get("documents") or []]
    others = [name for name in (*DOCUMENT_FIELDS, *COLLECTION_FIELDS) if name != "doc_id" and values.get(name)]
    if others and last == [values.get("doc_id")]:
        values.pop("doc_id")
    if not others and not values.get("doc_id") and last:
        values["doc_ids"] = last
    return resolve_documents(values, context, progress)


def run_fields(doc_ids: Sequence[str]) -> dict[str, Any]:
    """The input fields that named a run's documents, cleared once resolved; ``doc_id`` set to the one it reads.

    A collection run leaves ``doc_id`` empty: its documents are its ``documents``.
    """
    return {
        "path": "",
        "text": "",
        "doc_ids": [],
        "whole_namespace": False,
        "doc_id": doc_ids[0] if len(doc_ids) == 1 else "",
    }
