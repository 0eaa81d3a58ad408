"""The Chow-Liu tree: the ``ChowLiuTree`` type, the similarity weights, and ``build_tree``.

Weights. The weight of a pair of chunks is their cosine similarity (the mean cosine over embedders
when several embedding matrices are given), 0 on the diagonal and 0 where the similarity is <= 0.
With a temperature ``T`` the positive part is sharpened to ``exp(sim / T)``; pairs with
``sim <= 0`` stay at 0, so sharpening never makes unrelated chunks look related. The weight is a
non-decreasing function of the similarity, so a spanning tree of maximum total similarity is also
a spanning tree of maximum total weight: the structure of the tree does not depend on ``T`` (only
the edge weights, and therefore the "weight" root strategy, do).

Exact construction (``N <= exact_max``): the dense weight matrix, and scipy's
``minimum_spanning_tree`` on ``-(W + 1)``. scipy treats zeros of a dense input (and values within
its tolerance of zero, about 1e-8) as missing edges, so a tiny epsilon is not enough; shifting every
weight by the constant 1 keeps zero-weight pairs as edges and leaves the best spanning tree
unchanged, because every spanning tree has ``N - 1`` edges.

Sparse construction (``N > exact_max``): the edges come from :mod:`nodes.chain.ordering.sparse`, and
their weights are recomputed here from the vectors, as for the exact tree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from nodes.chain.ordering.sparse import EXHAUSTIVE_MAX, sparse_edges

METHODS = ("exact", "sparse")

_SHIFT = 1.0  # added to every weight handed to scipy, so zero weights stay edges
_MIN_TEMPERATURE = 1.0 / 700.0  # exp(1 / T) must stay finite in float64


@dataclass
class ChowLiuTree:
    """A maximum spanning tree over ``n`` chunks: undirected edges ``(i, j, weight)`` with ``i < j``."""

    n: int
    edges: list[tuple[int, int, float]]
    method: str = "exact"
    certified: bool = True

    def __post_init__(self) -> None:
        self.n = int(self.n)
        self.edges = sorted((min(int(i), int(j)), max(int(i), int(j)), float(w)) for i, j, w in self.edges)
        self.certified = bool(self.certified)
        self._validate()

    def _validate(self) -> None:
        """Reject anything that is not a spanning tree over ``range(n)``."""
        if self.n < 1:
            raise ValueError("a tree needs at least one node")
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; expected one of {', '.join(METHODS)}")
        if len(self.edges) != self.n - 1:
            raise ValueError(f"a spanning tree over {self.n} nodes has {self.n - 1} edges, got {len(self.edges)}")
        for i, j, w in self.edges:
            if not (0 <= i < j < self.n) or not math.isfinite(w):
                raise ValueError(f"bad edge ({i}, {j}, {w}) for {self.n} nodes")
        if self.n > 1 and connected_components(self.to_csr(), directed=False)[0] != 1:
            raise ValueError("edges do not connect all nodes")

    @property
    def total_weight(self) -> float:
        """Sum of the edge weights."""
        return math.fsum(w for _, _, w in self.edges)

    def to_csr(self) -> csr_matrix:
        """Symmetric sparse adjacency matrix (edge weight + 1, so zero weights stay stored)."""
        if not self.edges:
            return csr_matrix((self.n, self.n))
        i, j, w = (np.asarray(col) for col in zip(*self.edges, strict=True))
        data = np.concatenate([w, w]).astype(np.float64) + _SHIFT
        rows, cols = np.concatenate([i, j]), np.concatenate([j, i])
        return coo_matrix((data, (rows, cols)), shape=(self.n, self.n)).tocsr()

    def to_networkx(self) -> nx.Graph:
        """The tree as a weighted ``networkx.Graph`` over nodes ``0..n-1``."""
        graph = nx.Graph()
        graph.add_nodes_from(range(self.n))
        graph.add_weighted_edges_from(self.edges)
        return graph

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for the ordering cache)."""
        return {
            "n": self.n,
            "method": self.method,
            "certified": self.certified,
            "edges": [[i, j, w] for i, j, w in self.edges],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChowLiuTree:
        """Rebuild a tree written by :meth:`to_dict` (validated)."""
        edges = [(int(i), int(j), float(w)) for i, j, w in data["edges"]]
        return cls(int(data["n"]), edges, str(data.get("method", "exact")), bool(data.get("certified", True)))

    def adjacency(self) -> list[list[tuple[int, float]]]:
        """Neighbour lists ``[(j, weight), ...]`` per node."""
        adj: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        for i, j, w in self.edges:
            adj[i].append((j, w))
            adj[j].append((i, w))
        return adj

    def degrees(self) -> np.ndarray:
        """Number of tree neighbours per node."""
        ends = np.asarray([e[:2] for e in self.edges], dtype=np.int64).reshape(-1)
        return np.bincount(ends, minlength=self.n)

    def weight_sums(self) -> np.ndarray:
        """Sum of adjacent edge weights per node."""
        sums = np.zeros(self.n, dtype=np.float64)
        for i, j, w in self.edges:
            sums[i] += w
            sums[j] += w
        return sums


# ---------------------------------------------------------------- weights


def _check_temperature(temperature: float | None) -> None:
    """Reject temperatures that are not positive or that overflow ``exp(1 / T)``."""
    if temperature is None:
        return
    if not math.isfinite(temperature) or temperature < _MIN_TEMPERATURE:
        raise ValueError(f"temperature must be a finite number >= {_MIN_TEMPERATURE:.4g}, got {temperature!r}")


def _to_weights(sim: np.ndarray, temperature: float | None) -> np.ndarray:
    """Clip similarities at 0 and, with a temperature, sharpen the positive part to ``exp(sim / T)``."""
    sim = np.asarray(sim, dtype=np.float64)
    if temperature is None:
        return np.asarray(np.maximum(sim, 0.0))
    positive = sim > 0
    return np.where(positive, np.exp(np.where(positive, sim, 0.0) / temperature), 0.0)


def is_matrix_list(embeddings: Any) -> bool:
    """True when ``embeddings`` is a list of 2-D matrices (one per embedder)."""
    return (
        isinstance(embeddings, list | tuple)
        and len(embeddings) > 0
        and all(isinstance(m, np.ndarray) and m.ndim == 2 for m in embeddings)
    )


def unit_rows(embeddings: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """Float32 rows whose dot products are the cosines (averaged over embedders); zero rows stay 0."""
    mats = list(embeddings) if is_matrix_list(embeddings) else [embeddings]
    parts = []
    for mat in mats:
        arr = np.asarray(mat, dtype=np.float32)
        if arr.ndim != 2:
            raise ValueError(f"embeddings must be a 2-D matrix (chunks x dims), got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("embeddings contain NaN or infinite values")
        norms = np.sqrt(np.einsum("ij,ij->i", arr, arr, dtype=np.float64)) * math.sqrt(len(mats))
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        parts.append(arr * scale.astype(np.float32)[:, None])
    if len({p.shape[0] for p in parts}) != 1:
        raise ValueError("every embedding matrix must have one row per chunk (same N)")
    return np.ascontiguousarray(parts[0] if len(parts) == 1 else np.hstack(parts))


def similarity_weights(emb: np.ndarray | Sequence[np.ndarray], temperature: float | None = None) -> np.ndarray:
    """Dense ``N x N`` weight matrix: clipped (optionally sharpened) cosine similarity, 0 diagonal."""
    _check_temperature(temperature)
    z = unit_rows(emb).astype(np.float64)
    weights = _to_weights(z @ z.T, temperature)
    np.fill_diagonal(weights, 0.0)
    return weights


def _edge_weights(z: np.ndarray, i: np.ndarray, j: np.ndarray, temperature: float | None) -> np.ndarray:
    """Weights of the given pairs, recomputed in float64 from the unit rows (in blocks)."""
    sims = np.empty(len(i), dtype=np.float64)
    step = 8192
    for start in range(0, len(i), step):
        zi = z[i[start : start + step]].astype(np.float64)
        zj = z[j[start : start + step]].astype(np.float64)
        sims[start : start + step] = np.einsum("ij,ij->i", zi, zj)
    return _to_weights(sims, temperature)


def _make_tree(
    z: np.ndarray, i: np.ndarray, j: np.ndarray, temperature: float | None, method: str, certified: bool
) -> ChowLiuTree:
    """Assemble a tree from edge end points, with weights recomputed from the vectors."""
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    w = _edge_weights(z, lo, hi, temperature)
    edges = list(zip(lo.tolist(), hi.tolist(), w.tolist(), strict=True))
    return ChowLiuTree(len(z), edges, method, certified)


# ---------------------------------------------------------------- exact (dense) tree


def _exact_tree(z: np.ndarray, temperature: float | None) -> ChowLiuTree:
    """Maximum spanning tree of the dense weight matrix via scipy on ``-(W + 1)``."""
    z64 = z.astype(np.float64)
    graph = _to_weights(z64 @ z64.T, temperature)
    graph += _SHIFT
    np.negative(graph, out=graph)
    np.fill_diagonal(graph, 0.0)
    mst = minimum_spanning_tree(graph).tocoo()
    del graph
    return _make_tree(z, mst.row.astype(np.int64), mst.col.astype(np.int64), temperature, "exact", True)


def _sparse_tree(
    z: np.ndarray, temperature: float | None, k: int | None, exhaustive_max: int, seed: int
) -> ChowLiuTree:
    """Spanning tree from k-nearest-neighbour lists (exhaustive or inverted-file) and Boruvka."""
    pairs, certified = sparse_edges(z, k, exhaustive_max, seed)
    return _make_tree(z, pairs[:, 0], pairs[:, 1], temperature, "sparse", certified)


def build_tree(
    embeddings: np.ndarray | Sequence[np.ndarray],
    *,
    temperature: float | None = None,
    exact_max: int = 2000,
    k: int | None = None,
    seed: int = 0,
    exhaustive_max: int = EXHAUSTIVE_MAX,
) -> ChowLiuTree:
    """Chow-Liu tree (maximum spanning tree of the chunk similarity graph); see the module notes."""
    _check_temperature(temperature)
    z = unit_rows(embeddings)
    if len(z) == 0:
        raise ValueError("cannot build a tree over zero chunks")
    if len(z) == 1:
        return ChowLiuTree(1, [], "exact", True)
    if len(z) <= exact_max:
        return _exact_tree(z, temperature)
    return _sparse_tree(z, temperature, k, exhaustive_max, seed)
