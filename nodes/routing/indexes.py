"""Retrieval indexes over a registry: BM25 over the node texts, exact cosine search in memory, and
vector search in the shared Chroma store; ``gather_candidates`` runs the ones the settings ask for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nodes.routing.fusion import Candidates, RouteSettings
from nodes.routing.model import NodeId, PerRegistry, Ranked, Registry
from stores.settings import InputError


class BM25Index:
    """BM25 over the agent texts and, separately, the tool texts of a registry (CJK-aware tokens)."""

    def __init__(self, registry: Registry) -> None:
        import bm25s

        self.agent_nodes = [a.node for a in registry.agents]
        self.tool_nodes = [t.node for t in registry.tools]
        self._agents = self._index(bm25s, [a.text for a in registry.agents])
        self._tools = self._index(bm25s, [t.text for t in registry.tools])

    @staticmethod
    def tokens(text: str) -> list[str]:
        """BM25 terms: words and CJK characters/bigrams, without English stopwords."""
        from bm25s.stopwords import STOPWORDS_EN

        from stores.text import lexical_tokens

        return [t for t in lexical_tokens(text) if t not in STOPWORDS_EN]

    def _index(self, bm25s: Any, texts: list[str]) -> Any:
        if not texts:
            return None
        index = bm25s.BM25()
        index.index([self.tokens(t) or ["\x00"] for t in texts], show_progress=False)
        return index

    @staticmethod
    def _top(index: Any, nodes: list[NodeId], tokens: list[str], n: int) -> Ranked:
        if index is None or not tokens or n <= 0:
            return []
        scores = np.asarray(index.get_scores(tokens), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(nodes[i], float(scores[i])) for i in order if scores[i] > 0]

    def search(self, request: str, n: int) -> tuple[Ranked, Ranked]:
        """Top ``n`` agents and top ``n`` tools for ``request`` (only those sharing a term with it)."""
        tokens = self.tokens(request)
        return self._top(self._agents, self.agent_nodes, tokens, n), self._top(self._tools, self.tool_nodes, tokens, n)


bm25_index: PerRegistry[BM25Index] = PerRegistry(BM25Index)
"""The (cached) BM25 index of a registry."""


class MatrixIndex:
    """Exact cosine search over in-memory agent and tool vectors (benchmarks, tests)."""

    def __init__(self, registry: Registry, vectors: Mapping[NodeId, Sequence[float]]) -> None:
        self.agent_nodes = [a.node for a in registry.agents]
        self.tool_nodes = [t.node for t in registry.tools]
        missing = [n for n in self.agent_nodes + self.tool_nodes if n not in vectors]
        if missing:
            raise InputError(f"no vector for {len(missing)} registry nodes, e.g. {missing[0]}")
        self._agents = self._matrix([vectors[n] for n in self.agent_nodes])
        self._tools = self._matrix([vectors[n] for n in self.tool_nodes])

    @staticmethod
    def _matrix(rows: list[Sequence[float]]) -> np.ndarray:
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        m = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return m / norms

    @staticmethod
    def _top(matrix: np.ndarray, nodes: list[NodeId], q: np.ndarray, n: int) -> list[Ranked]:
        if not nodes or n <= 0:
            return [[] for _ in range(len(q))]
        sims = q @ matrix.T
        n = min(n, len(nodes))
        out = []
        for row in sims:
            idx = np.argpartition(-row, n - 1)[:n] if n < len(nodes) else np.arange(len(nodes))
            idx = idx[np.lexsort((idx, -row[idx]))]
            out.append([(nodes[i], float(row[i])) for i in idx])
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector."""
        q = self._matrix(list(vectors)) if len(vectors) else np.zeros((0, 1), dtype=np.float32)
        agents = self._top(self._agents, self.agent_nodes, q, n)
        tools = self._top(self._tools, self.tool_nodes, q, n)
        return list(zip(agents, tools, strict=True))


class StoreIndex:
    """Vector search over a registry's agent and tool records in the shared Chroma store."""

    def __init__(self, registry: Registry, store: Any) -> None:
        self.registry = registry
        self.store = store
        self.nodes = registry.record_nodes
        self.counts = {"agent": len(registry.agents), "tool": len(registry.tools)}

    def _query(self, vectors: Sequence[Sequence[float]], kind: str, n: int) -> list[Ranked]:
        n = min(n, self.counts[kind])
        if n <= 0 or not vectors:
            return [[] for _ in vectors]
        res = self.store.collection.query(
            query_embeddings=[np.asarray(v, dtype=np.float32) for v in vectors],
            n_results=n,
            where={"$and": [{"kind": kind}, {"doc_id": self.registry.doc_id}]},
            include=["distances"],
        )
        out = []
        for ids, dists in zip(res["ids"], res["distances"], strict=True):
            out.append([(self.nodes[i], 1.0 - float(d)) for i, d in zip(ids, dists, strict=True) if i in self.nodes])
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector (one store query per kind)."""
        agents = self._query(vectors, "agent", n)
        tools = self._query(vectors, "tool", n)
        return list(zip(agents, tools, strict=True))


_memory: dict[tuple[str, str, str], MatrixIndex] = {}
_memory_lock = threading.Lock()


def memory_index(registry: Registry, store: Any) -> MatrixIndex:
    """Exact in-memory search over the registry's vectors as stored in ``store`` (read once per process).

    Chroma filters by metadata before its vector search, which costs about 0.1 s per query once a
    namespace holds some 10,000 records; this index costs a matrix product instead.
    """
    key = (store.namespace, store.collection_name, registry.content_hash)
    with _memory_lock:
        if key in _memory:
            return _memory[key]
    ids = list(registry.record_nodes)
    vectors: dict[NodeId, Sequence[float]] = {}
    for start in range(0, len(ids), 2000):
        for hit in store.get(ids[start : start + 2000], with_embeddings=True):
            if hit.embedding is not None:
                vectors[registry.record_nodes[hit.id]] = hit.embedding
    if len(vectors) != len(ids):
        raise InputError(f"registry {registry.name!r} is not fully registered in namespace {store.namespace!r}")
    index = MatrixIndex(registry, vectors)
    with _memory_lock:
        if len(_memory) > 8:
            _memory.clear()
        _memory[key] = index
    return index


def gather_candidates(
    requests: Sequence[str],
    registry: Registry,
    index: StoreIndex | MatrixIndex | None,
    settings: RouteSettings,
    *,
    embed_query: Callable[[str], Sequence[float]] | None = None,
    query_vectors: Sequence[Sequence[float]] | None = None,
) -> list[Candidates]:
    """Run the retrievers the settings call for, for every request (vector search batched)."""
    n = settings.candidates
    out = [Candidates() for _ in requests]
    if settings.retrieval in ("vector", "hybrid"):
        if index is None:
            raise InputError("vector retrieval needs an index")
        if query_vectors is None:
            if embed_query is None:
                raise InputError("vector retrieval needs query vectors or an embed_query function")
            query_vectors = [embed_query(r) for r in requests]
        for cands, (agents, tools) in zip(out, index.search(query_vectors, n), strict=True):
            cands.agents, cands.tools = agents, tools
    if settings.retrieval in ("bm25", "hybrid"):
        bm25 = bm25_index(registry)
        for cands, request in zip(out, requests, strict=True):
            cands.bm25_agents, cands.bm25_tools = bm25.search(request, n)
    return out
