"""Small named texts of a namespace (a document's metadata and text) kept in the Chroma server.

With ``LONGDOC_CHROMA_URL`` set, every server instance reads and writes these instead of files under
``LONGDOC_HOME`` (:mod:`stores.documents`, the route's manifests and expansions, retention).
"""

from __future__ import annotations

from typing import Any

from stores.chroma_client import check_namespace, get_client
from stores.settings import get_settings


class SharedFiles:
    """Small named texts of one namespace (a document's metadata and text) kept in the Chroma server.

    Used instead of files under ``LONGDOC_HOME`` when ``LONGDOC_CHROMA_URL`` is set, so every
    server instance sees what any of them ingested. A collection of its own per namespace, without
    an embedding function: each record carries the same one-number vector and is read by id or
    by its ``name`` field, never searched.
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = check_namespace(namespace)
        self._collection: Any = None

    @property
    def collection(self) -> Any:
        """The namespace's Chroma collection of files, opened on first use."""
        if self._collection is None:
            self._collection = get_client().get_or_create_collection(
                name=f"ld-{self.namespace}-files", embedding_function=None, metadata={"namespace": self.namespace}
            )
        return self._collection

    def put(self, folder: str, name: str, text: str) -> None:
        """Write ``folder/name`` (replacing it)."""
        self.collection.upsert(
            ids=[f"{folder}/{name}"], documents=[text], embeddings=[[1.0]], metadatas=[{"folder": folder, "name": name}]
        )

    def get(self, folder: str, name: str) -> str | None:
        """The text of ``folder/name``, None when it was never written."""
        res = self.collection.get(ids=[f"{folder}/{name}"], include=["documents"])
        return res["documents"][0] if res["ids"] else None

    def all_named(self, name: str) -> list[str]:
        """The texts of every file called ``name``, ordered by folder."""
        res = self.collection.get(where={"name": name}, include=["documents", "metadatas"])
        pairs = sorted(zip([m["folder"] for m in res["metadatas"]], res["documents"], strict=True))
        return [text for _, text in pairs]


def shared_files(namespace: str) -> SharedFiles | None:
    """The namespace's :class:`SharedFiles` when a Chroma server is configured, else None (local files)."""
    return SharedFiles(namespace) if get_settings().chroma_url else None
