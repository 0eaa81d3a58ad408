"""Retrieval indexes over a registry: BM25, exact cosine search in memory, and vector search in Chroma.

BM25 runs over the node texts, the vector search in the shared Chroma store; ``gather_candidates`` runs the ones
the settings ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from nodes.route.entities import clauses, kind_index
from nodes.route.fusion import Candidates, RouteSettings
from nodes.route.model import Agent, NodeId, PerRegistry, Ranked, Registry, Tool
from stores.cache import ProcessCache
from stores.errors import InputError

FIELDS: tuple[str, ...] = ("name", "description", "parameters", "examples")
"""The fields of a node's document that field-weighted BM25 scores separately, in the order of
``RouteSettings.bm25_fields`` (an agent has no parameters)."""


def _fields(entry: Agent | Tool) -> tuple[str, str, str, str]:
    from nodes.route.entities import split_words

    parameters = entry.parameters if isinstance(entry, Tool) else ()
    return (
        " ".join(split_words(entry.name)),
        entry.description,
        " ".join(w for p in parameters for w in split_words(p)),
        " ".join(entry.examples),
    )


class BM25Index:
    """BM25 over the agent texts and, separately, the tool texts of a registry (CJK-aware tokens).

    Besides the joint document of each node (its text and examples), each field (name,
    description, parameter names, examples) is indexed on its own, for field-weighted scoring:
    ``sum(weight_f * bm25_f)`` over the fields (the per-field sum of BM25F's simpler relatives).
    """

    def __init__(self, registry: Registry) -> None:
        import bm25s

        self.agent_nodes = [a.node for a in registry.agents]
        self.tool_nodes = [t.node for t in registry.tools]
        self._agents = self._index(bm25s, [a.search_text for a in registry.agents])
        self._tools = self._index(bm25s, [t.search_text for t in registry.tools])
        agent_fields = [_fields(a) for a in registry.agents]
        tool_fields = [_fields(t) for t in registry.tools]
        self._agent_fields = [self._index(bm25s, [f[i] for f in agent_fields]) for i in range(len(FIELDS))]
        self._tool_fields = [self._index(bm25s, [f[i] for f in tool_fields]) for i in range(len(FIELDS))]

    @staticmethod
    def tokens(text: str) -> list[str]:
        """BM25 terms: words and CJK characters/bigrams, without English stopwords."""
        from bm25s.stopwords import STOPWORDS_EN

        from stores.text import lexical_tokens

        return [t for t in lexical_tokens(text) if t not in STOPWORDS_EN]

    def _index(self, bm25s: Any, texts: list[str]) -> Any:
        if not texts or not any(self.tokens(t) for t in texts):
            return None
        index = bm25s.BM25()
        index.index([self.tokens(t) or ["\x00"] for t in texts], show_progress=False)
        return index

    @staticmethod
    def _scores(indexes: Sequence[Any], weights: Sequence[float], tokens: list[str], size: int) -> np.ndarray:
        total = np.zeros(size, dtype=np.float64)
        for index, weight in zip(indexes, weights, strict=True):
            if index is not None and weight > 0:
                total += weight * np.asarray(index.get_scores(tokens), dtype=np.float64)
        return total

    @staticmethod
    def _top(scores: np.ndarray, nodes: list[NodeId], n: int) -> Ranked:
        order = np.argsort(-scores, kind="stable")[:n]
        return [(nodes[i], float(scores[i])) for i in order if scores[i] > 0]

    def search(self, request: str, n: int, fields: Sequence[float] | None = None) -> tuple[Ranked, Ranked]:
        """Top ``n`` agents and top ``n`` tools for ``request`` (only those sharing a term with it).

        ``fields``: one weight per field of :data:`FIELDS` to score the fields apart; ``None``
        scores each node's joint document.
        """
        tokens = self.tokens(request)
        if not tokens or n <= 0:
            return [], []
        if fields is None:
            agents = self._scores([self._agents], [1.0], tokens, len(self.agent_nodes))
            tools = self._scores([self._tools], [1.0], tokens, len(self.tool_nodes))
        else:
            if len(fields) != len(FIELDS):
                raise InputError(f"give one BM25 field weight per field ({', '.join(FIELDS)})")
            agents = self._scores(self._agent_fields, fields, tokens, len(self.agent_nodes))
            tools = self._scores(self._tool_fields, fields, tokens, len(self.tool_nodes))
        return self._top(agents, self.agent_nodes, n), self._top(tools, self.tool_nodes, n)


bm25_index: PerRegistry[BM25Index] = PerRegistry(BM25Index)
"""The (cached) BM25 index of a registry."""


def best_per_node(ranked: Ranked, n: int) -> Ranked:
    """The first (best) hit of each node, at most ``n``: a node's examples are more vectors of it."""
    seen: set[NodeId] = set()
    out: Ranked = []
    for node, score in ranked:
        if node not in seen:
            seen.add(node)
            out.append((node, score))
            if len(out) >= n:
                break
    return out


class MatrixIndex:
    """Exact cosine search over in-memory agent and tool vectors (benchmarks, tests).

    ``vectors`` gives each node one vector, or several (its text's and its examples'); a node
    scores its best vector.
    """

    def __init__(
        self, registry: Registry, vectors: Mapping[NodeId, Sequence[float] | Sequence[Sequence[float]]]
    ) -> None:
        nodes = [a.node for a in registry.agents] + [t.node for t in registry.tools]
        missing = [n for n in nodes if n not in vectors]
        if missing:
            raise InputError(f"no vector for {len(missing)} registry nodes, e.g. {missing[0]}")
        self._agents = self._rows([a.node for a in registry.agents], vectors)
        self._tools = self._rows([t.node for t in registry.tools], vectors)

    @classmethod
    def _rows(cls, nodes: list[NodeId], vectors: Mapping[NodeId, Any]) -> tuple[list[NodeId], np.ndarray, int]:
        labels: list[NodeId] = []
        rows: list[Any] = []
        for node in nodes:
            value = np.asarray(vectors[node], dtype=np.float32)
            for row in value.reshape(-1, value.shape[-1]) if value.size else []:
                labels.append(node)
                rows.append(row)
        return labels, cls._matrix(rows), len(nodes)

    @staticmethod
    def _matrix(rows: list[Sequence[float]]) -> np.ndarray:
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        m = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.asarray(m / norms)

    @staticmethod
    def _top(index: tuple[list[NodeId], np.ndarray, int], q: np.ndarray, n: int) -> list[Ranked]:
        labels, matrix, n_nodes = index
        if not labels or n <= 0:
            return [[] for _ in range(len(q))]
        sims = q @ matrix.T
        n = min(n, n_nodes)
        out = []
        for row in sims:
            order = np.lexsort((np.arange(len(labels)), -row))
            out.append(best_per_node([(labels[i], float(row[i])) for i in order], n))
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector."""
        q = self._matrix(list(vectors)) if len(vectors) else np.zeros((0, 1), dtype=np.float32)
        agents = self._top(self._agents, q, n)
        tools = self._top(self._tools, q, n)
        return list(zip(agents, tools, strict=True))


class StoreIndex:
    """Vector search over a registry's agent and tool records in the shared Chroma store."""

    def __init__(self, registry: Registry, store: Any) -> None:
        self.registry = registry
        self.store = store
        self.nodes = registry.record_nodes
        self.counts = {"agent": len(registry.agents), "tool": len(registry.tools)}
        self.records = {kind: sum(1 for node in self.nodes.values() if node[0] == kind) for kind in self.counts}
        self.per_node = 1 + max((len(e.examples) for e in registry.entries), default=0)

    def _query(self, vectors: Sequence[Sequence[float]], kind: str, n: int) -> list[Ranked]:
        n = min(n, self.counts[kind])
        if n <= 0 or not vectors:
            return [[] for _ in vectors]
        res = self.store.collection.query(
            query_embeddings=[np.asarray(v, dtype=np.float32) for v in vectors],
            # Enough records that ``n`` distinct nodes are among them even if each brings all its examples.
            n_results=min(n * self.per_node, self.records[kind]),
            where={"$and": [{"kind": kind}, {"doc_id": self.registry.doc_id}]},
            include=["distances"],
        )
        out = []
        for ids, dists in zip(res["ids"], res["distances"], strict=True):
            hits = [(self.nodes[i], 1.0 - float(d)) for i, d in zip(ids, dists, strict=True) if i in self.nodes]
            out.append(best_per_node(hits, n))
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector (one store query per kind)."""
        agents = self._query(vectors, "agent", n)
        tools = self._query(vectors, "tool", n)
        return list(zip(agents, tools, strict=True))


_memory: ProcessCache[tuple[str, str, str], MatrixIndex] = ProcessCache("registry matrices", 8)


def memory_index(registry: Registry, store: Any) -> MatrixIndex:
    """Exact in-memory search over the registry's vectors as stored in ``store`` (read once per process).

    Chroma filters by metadata before its vector search, which costs about 0.1 s per query once a
    namespace holds some 10,000 records; this index costs a matrix product instead.
    """
    key = (store.namespace, store.collection_name, registry.content_hash)
    return _memory.get_or_build(key, lambda: _read_matrix(registry, store))


def _read_matrix(registry: Registry, store: Any) -> MatrixIndex:
    ids = list(registry.record_nodes)
    vectors: dict[NodeId, list[Sequence[float]]] = {}
    found = 0
    for start in range(0, len(ids), 2000):
        for hit in store.get(ids[start : start + 2000], with_embeddings=True):
            if hit.embedding is not None:
                vectors.setdefault(registry.record_nodes[hit.id], []).append(hit.embedding)
                found += 1
    if found != len(ids):
        raise InputError(f"registry {registry.name!r} is not fully registered in namespace {store.namespace!r}")
    return MatrixIndex(registry, vectors)


def gather_candidates(
    requests: Sequence[str],
    registry: Registry,
    index: StoreIndex | MatrixIndex | None,
    settings: RouteSettings,
    *,
    embed_query: Callable[[str], Sequence[float]] | None = None,
    query_vectors: Sequence[Sequence[float]] | None = None,
) -> list[Candidates]:
    """Run the retrievers the settings call for, for every request (vector search batched).

    With ``settings.clause_weight`` each request of several clauses also gets its clauses'
    candidates (their vectors from ``embed_query``); with ``settings.entity_weight`` the tools
    taking the kinds of entity it carries, ordered by its own retrieval among equals.
    """
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
            cands.bm25_agents, cands.bm25_tools = bm25.search(request, n, settings.bm25_fields)
    if settings.entity_weight > 0:
        kinds = kind_index(registry)
        for cands, request in zip(out, requests, strict=True):
            seen = [node for node, _s in cands.tools] + [node for node, _s in cands.bm25_tools]
            cands.entity_tools = kinds.search(request, list(dict.fromkeys(seen)), n)
    if settings.clause_weight > 0:
        _gather_clauses(requests, out, registry, index, settings, embed_query)
    return out


def _gather_clauses(
    requests: Sequence[str],
    out: list[Candidates],
    registry: Registry,
    index: StoreIndex | MatrixIndex | None,
    settings: RouteSettings,
    embed_query: Callable[[str], Sequence[float]] | None,
) -> None:
    parts = [clauses(r) for r in requests]
    flat = [c for p in parts for c in p]
    if not flat:
        return
    if settings.retrieval != "bm25" and embed_query is None:
        raise InputError("clause retrieval needs an embed_query function")
    plain = replace(settings, clause_weight=0.0, entity_weight=0.0)
    found = gather_candidates(flat, registry, index, plain, embed_query=embed_query)
    start = 0
    for cands, p in zip(out, parts, strict=True):
        cands.clauses = found[start : start + len(p)]
        start += len(p)
