"""The one Chroma store every workflow shares.

A persistent local directory under ``LONGDOC_HOME`` by default, a Chroma server when
``LONGDOC_CHROMA_URL`` is set. One collection per (namespace, embedder), so one tenant never
sees another's records and vectors of different spaces never mix. Every record has a ``kind``
(chunk, canvas, offload, agent, tool), a ``doc_id``, and for chunks a ``chunk_id``, a
``position``, a ``section`` and the ``index`` (build) they belong to: reads of a document's chunks
see only the index its record publishes (:func:`stores.documents.published_index`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from stores.cache import ProcessCache

# the client and the namespace check are read here by the store's users too
from stores.chroma_client import check_namespace as check_namespace
from stores.chroma_client import get_client as get_client
from stores.chroma_client import reset_clients
from stores.documents import published_index
from stores.embedders import embedder_id, get_embedder
from stores.errors import InputError
from stores.settings import get_settings

KINDS = ("chunk", "canvas", "offload", "agent", "tool")
DEFAULT_BATCH = 256


@dataclass
class Record:
    """One record to store."""

    id: str
    text: str
    kind: str
    doc_id: str
    chunk_id: str = ""
    position: int = -1
    section: str = ""
    extra: dict[str, str | int | float | bool] = field(default_factory=dict)

    def metadata(self) -> dict[str, str | int | float | bool]:
        """The record's Chroma metadata; InputError for an unknown kind."""
        if self.kind not in KINDS:
            raise InputError(f"unknown record kind {self.kind!r}; one of {', '.join(KINDS)}")
        meta: dict[str, str | int | float | bool] = {
            "kind": self.kind,
            "doc_id": self.doc_id,
            "chunk_id": self.chunk_id,
            "position": int(self.position),
            "section": self.section,
        }
        if self.kind == "chunk":
            meta["index"] = ""  # stored outside an index build: seen only while the document has no record
        for key, value in self.extra.items():
            if value is not None:
                meta[key] = value
        return meta


@dataclass
class Hit:
    """A stored record read back, with a similarity score when it came from a search."""

    id: str
    text: str
    metadata: dict[str, Any]
    score: float = 0.0
    embedding: list[float] | None = None

    @property
    def chunk_id(self) -> str:
        """The chunk id from the metadata (empty if absent)."""
        return str(self.metadata.get("chunk_id", ""))

    @property
    def position(self) -> int:
        """The chunk's position from the metadata (-1 if absent)."""
        return int(self.metadata.get("position", -1))

    @property
    def section(self) -> str:
        """The section heading from the metadata (empty if absent)."""
        return str(self.metadata.get("section", ""))


def _where(**conds: Any) -> dict[str, Any] | None:
    items = [{k: v} for k, v in conds.items() if v is not None]
    if not items:
        return None
    return items[0] if len(items) == 1 else {"$and": items}


class VectorStore:
    """Records of one namespace in one embedder's vector space."""

    def __init__(self, namespace: str = "default", embedder: Embeddings | str | None = None) -> None:
        self.namespace = check_namespace(namespace)
        if embedder is None or isinstance(embedder, str):
            self.embedder_name = (embedder or get_settings().embedder).lower()
            self.embedder = get_embedder(self.embedder_name)
        else:
            self.embedder = embedder
            self.embedder_name = "hash" if embedder_id(embedder).startswith("hash") else embedder_id(embedder)
        self.space = re.sub(r"[^a-z0-9-]+", "-", embedder_id(self.embedder).lower()).strip("-")
        self.collection_name = f"ld-{self.namespace}-{self.space}"[:512]
        self._collection: Any = None

    @property
    def collection(self) -> Any:
        """The namespace's Chroma collection, opened on first use."""
        if self._collection is None:
            from stores.chroma_embedding import LongdocEmbeddingFunction

            self._collection = get_client().get_or_create_collection(
                name=self.collection_name,
                embedding_function=LongdocEmbeddingFunction(self.embedder_name),
                metadata={"hnsw:space": "cosine", "namespace": self.namespace},
            )
        return self._collection

    # writing -------------------------------------------------------------------------
    def add(
        self,
        records: Sequence[Record],
        embeddings: Sequence[Sequence[float]] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Embed (unless given) and upsert ``records`` in batches; returns how many were written."""
        total = len(records)
        if embeddings is not None and len(embeddings) != total:
            raise InputError("records and embeddings differ in length")
        done = 0
        for start in range(0, total, batch_size):
            batch = list(records[start : start + batch_size])
            vectors = (
                [list(map(float, v)) for v in embeddings[start : start + batch_size]]
                if embeddings is not None
                else self.embedder.embed_documents([r.text for r in batch])
            )
            self.collection.upsert(
                ids=[r.id for r in batch],
                documents=[r.text for r in batch],
                metadatas=[r.metadata() for r in batch],
                embeddings=[np.asarray(v, dtype=np.float32) for v in vectors],
            )
            done += len(batch)
            if progress is not None:
                progress(done, total)
        return done

    def delete(self, ids: Iterable[str] | None = None, *, doc_id: str | None = None, kind: str | None = None) -> None:
        """Delete records by id, or every record of a document (optionally of one kind)."""
        id_list = list(ids) if ids is not None else None
        if id_list:
            self.collection.delete(ids=id_list)
        elif doc_id is not None or kind is not None:
            self.collection.delete(where=_where(doc_id=doc_id, kind=kind))

    def drop_indexes(self, doc_id: str, keep: Iterable[str] = ()) -> int:
        """Delete the chunks of ``doc_id`` whose index is not in ``keep`` (builds replaced or left unfinished)."""
        return drop_indexes(self.collection, doc_id, keep)

    # reading -------------------------------------------------------------------------
    def published(self, doc_id: str) -> str:
        """The index of ``doc_id`` its record publishes (``""``: none, so no chunk is seen)."""
        return published_index(self.namespace, doc_id)

    def _doc_where(self, doc_id: str | None, kind: str | None, index: str | None = None) -> dict[str, Any] | None:
        """The filter of a document's records; a document's chunks are those of one index (default: the published)."""
        if doc_id is not None and kind == "chunk":
            return _where(doc_id=doc_id, kind=kind, index=self.published(doc_id) if index is None else index)
        return _where(doc_id=doc_id, kind=kind)

    def count(self, *, doc_id: str | None = None, kind: str | None = None, index: str | None = None) -> int:
        """Number of records, optionally of one document and kind (a document's chunks: of one index)."""
        where = self._doc_where(doc_id, kind, index)
        if where is None:
            return int(self.collection.count())
        return len(self.collection.get(where=where, include=[])["ids"])

    def chunk_ids(self, doc_id: str, index: str) -> set[str]:
        """Record ids of the chunks of ``doc_id`` stored under ``index``."""
        return set(self.collection.get(where=self._doc_where(doc_id, "chunk", index), include=[])["ids"])

    def chunks(self, doc_id: str, chunk_ids: Sequence[str]) -> list[Hit]:
        """Chunks of ``doc_id``'s published index by chunk id (``c3``), in the order asked (missing ones skipped)."""
        wanted = list(dict.fromkeys(str(cid) for cid in chunk_ids))
        if not wanted:
            return []
        cond = self._doc_where(doc_id, "chunk")
        where = {"$and": [cond, {"chunk_id": {"$in": wanted}}]}
        res = self.collection.get(where=where, include=["documents", "metadatas"])
        by_chunk = {h.chunk_id: h for h in self._hits(res, False)}
        return [by_chunk[cid] for cid in chunk_ids if cid in by_chunk]

    def get(self, ids: Sequence[str], *, with_embeddings: bool = False) -> list[Hit]:
        """Records by id, in the order asked (missing ids are skipped)."""
        if not ids:
            return []
        include = ["documents", "metadatas"] + (["embeddings"] if with_embeddings else [])
        res = self.collection.get(ids=list(ids), include=include)
        hits = self._hits(res, with_embeddings)
        by_id = {h.id: h for h in hits}
        return [by_id[i] for i in ids if i in by_id]

    def by_doc(
        self, doc_id: str, kind: str = "chunk", *, with_embeddings: bool = False, index: str | None = None
    ) -> list[Hit]:
        """Every record of ``doc_id`` of ``kind``, in document position order (chunks: of the published index)."""
        include = ["documents", "metadatas"] + (["embeddings"] if with_embeddings else [])
        res = self.collection.get(where=self._doc_where(doc_id, kind, index), include=include)
        return sorted(self._hits(res, with_embeddings), key=lambda h: (h.position, h.id))

    def search(
        self,
        query: str | Sequence[float],
        *,
        k: int = 8,
        kind: str | None = "chunk",
        doc_id: str | None = None,
        min_score: float | None = None,
        where: dict[str, Any] | None = None,
        matching: int | None = None,
    ) -> list[Hit]:
        """Nearest records to ``query`` (text or vector), best first; score is cosine similarity.

        ``matching``: how many records the filter matches, when the caller knows (else it is asked first).
        """
        if k <= 0:
            return []
        vector = self.embedder.embed_query(query) if isinstance(query, str) else list(query)
        cond = self._doc_where(doc_id, kind)
        if where:
            cond = {"$and": [cond, where]} if cond else where
        # Chroma refuses more results than records match: ask how many, up to k (not every matching id).
        if matching is not None:
            available = matching
        elif cond:
            available = len(self.collection.get(where=cond, include=[], limit=k)["ids"])
        else:
            available = self.collection.count()
        if available == 0:
            return []
        res = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=min(k, available),
            where=cond,
            include=["documents", "metadatas", "distances"],
        )
        hits = []
        for i, rid in enumerate(res["ids"][0]):
            score = 1.0 - float(res["distances"][0][i])
            if min_score is not None and score < min_score:
                continue
            hits.append(
                Hit(id=rid, text=res["documents"][0][i] or "", metadata=dict(res["metadatas"][0][i] or {}), score=score)
            )
        return hits

    @staticmethod
    def _hits(res: dict[str, Any], with_embeddings: bool) -> list[Hit]:
        hits = []
        embs = res.get("embeddings") if with_embeddings else None
        for i, rid in enumerate(res["ids"]):
            emb = None
            if embs is not None and len(embs) > i:
                emb = [float(x) for x in embs[i]]
            hits.append(
                Hit(
                    id=rid,
                    text=(res["documents"][i] if res.get("documents") else "") or "",
                    metadata=dict((res["metadatas"][i] if res.get("metadatas") else None) or {}),
                    embedding=emb,
                )
            )
        return hits


def drop_indexes(collection: Any, doc_id: str, keep: Iterable[str] = ()) -> int:
    """Delete from ``collection`` the chunks of ``doc_id`` whose index is not in ``keep``; returns how many."""
    kept = set(keep)
    res = collection.get(where=_where(doc_id=doc_id, kind="chunk"), include=["metadatas"])
    pairs = zip(res["ids"], res["metadatas"], strict=True)
    stale = [rid for rid, meta in pairs if (meta or {}).get("index") not in kept]
    for start in range(0, len(stale), 5000):
        collection.delete(ids=stale[start : start + 5000])
    return len(stale)


def namespace_collections(namespace: str) -> list[Any]:
    """Every record collection of ``namespace``, one per embedder space (not its shared files)."""
    namespace = check_namespace(namespace)
    return [
        c
        for c in get_client().list_collections()
        if (c.metadata or {}).get("namespace") == namespace and c.name != f"ld-{namespace}-files"
    ]


def chunk_record_id(doc_id: str, index: str, chunk_id: str) -> str:
    """Store id of chunk ``chunk_id`` of ``doc_id`` in the build ``index`` (builds never share a record)."""
    return f"{doc_id}:{index}:{chunk_id}"


_stores: ProcessCache[tuple[str, str, str], VectorStore] = ProcessCache("vector stores", 256)


def get_store(namespace: str = "default", embedder: str | None = None) -> VectorStore:
    """The shared store of ``namespace`` for the configured embedder (cached per process)."""
    settings = get_settings()
    name = (embedder or settings.embedder).lower()
    key = (settings.chroma_url or str(settings.home), check_namespace(namespace), name)
    return _stores.get_or_build(key, lambda: VectorStore(namespace, name), exclusive=True)


def reset_stores() -> None:
    """Forget cached stores and clients (used when settings change, e.g. in tests)."""
    _stores.clear()
    reset_clients()
