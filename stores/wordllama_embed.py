"""The ``wordllama`` embedder: WordLlama's static token vectors (English, 256-d), shipped inside its wheel.

``wordllama`` (the ``wordllama`` extra) holds its weights (``l2_supercat_256.safetensors``, 16 MB) and tokenizer
in the package: :class:`WordLlamaEmbeddings` loads them from the installed package with downloads disabled, so it
runs offline. A text's vector is the mean of all its tokens' vectors (no attention, no window: nothing of a long
text is cut): a short request is embedded in about 0.1 ms, and requests are told apart less well than by a
transformer encoder (docs/benchmarks/route.md measures it on the routing dev queries; the router does not take
it by default).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

from langchain_core.embeddings import Embeddings


class WordLlamaEmbeddings(Embeddings):
    """WordLlama ``l2_supercat`` static embeddings, L2-normalised.

    Args:
        dim: Dimensions kept (Matryoshka truncation of the 256 shipped: 64, 128 or 256); changes the
            ``embedder_id``.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.embedder_id = "wordllama-l2-supercat" + ("" if dim == 256 else f"-d{dim}")
        self._model: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                import wordllama

                folder = Path(wordllama.__file__).parent
                self._model = wordllama.WordLlama.load(
                    config="l2_supercat", cache_dir=folder, dim=256, trunc_dim=self.dim, disable_download=True
                )
            return self._model

    def warm(self) -> None:
        """Load the vectors now (a server calls this at start, off the request path)."""
        self._get()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        if not texts:
            return []
        return cast("list[list[float]]", self._get().embed(list(texts), norm=True).tolist())

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        return self.embed_documents([text])[0]
