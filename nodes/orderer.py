"""Chow-Liu ordering of chunks for the Chain-of-Agents.

The tree is query-independent and can be cached per document; the root and the traversal depend on
the question.

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

Sparse construction (``N > exact_max``): no ``N x N`` matrix is ever held. Each chunk's ``k``
nearest neighbours are found in row blocks (``block @ emb.T``, then a per-row top-k), exhaustively
up to ``exhaustive_max`` chunks and with an inverted-file search (spherical k-means cells, each
scanned against its nearest cells) above that. The tree is then grown with Boruvka's algorithm:
in every round each component takes its best edge to another component, and components are merged
(union-find, so no cycle can form). For a row, the first listed neighbour outside its component is
its best outside edge, because the lists are sorted; a row whose whole list lies inside its own
component may still hold a better outside edge, but only one no better than its ``k``-th listed
similarity. Exactly those rows whose ``k``-th similarity reaches the component's best known edge
are rescanned against all chunks (in row blocks). With exhaustive lists every chosen edge is
therefore the true best edge of its component, and the result is a maximum spanning tree of the
full similarity graph for any ``k`` (``certified=True``). With inverted-file lists the result is a
maximum spanning tree of the approximate neighbour graph, where a component whose lists hold no
outside neighbour is joined through an exhaustive scan of up to ``_FALLBACK_ROWS`` of its rows
(``certified=False``). In both cases the result has ``N - 1`` edges and spans all chunks, including
zero vectors (similarity 0 with everything) and duplicates.

Determinism: the same input gives the same tree (the only randomness is the seeded k-means of the
inverted-file search); root choice, child order and the relevance order break ties towards the lower
chunk index.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree, shortest_path

ORDERS = ("best-first", "chow-liu-bfs", "chow-liu-dfs", "original", "reverse", "random", "relevance", "hybrid")
"""Chunk orders understood by :func:`order_chunks` (``best-first``: see :mod:`nodes.reading`)."""

ROOT_STRATEGIES = ("query", "degree", "weight")
TRAVERSALS = ("bfs", "dfs")
CHILD_ORDERS = ("weight", "relevance")
METHODS = ("exact", "sparse")

EXHAUSTIVE_MAX = 20_000
"""Largest N whose sparse neighbour lists are computed exhaustively (certified tree)."""

_SHIFT = 1.0  # added to every weight handed to scipy, so zero weights stay edges
_BLOCK_ELEMS = 1 << 22  # similarity entries a blockwise scan holds at once (16 MiB in float32)
_FALLBACK_ROWS = 64
_N_PROBE = 8
_ARGMAX_K = 32  # up to this k, top-k is k argmax passes; above it, argpartition
_KMEANS_ITERS = 8
_KMEANS_SAMPLE = 32  # k-means is fitted on this many points per cell at most
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
        return np.maximum(sim, 0.0)
    positive = sim > 0
    return np.where(positive, np.exp(np.where(positive, sim, 0.0) / temperature), 0.0)


def _is_matrix_list(embeddings: Any) -> bool:
    """True when ``embeddings`` is a list of 2-D matrices (one per embedder)."""
    return (
        isinstance(embeddings, list | tuple)
        and len(embeddings) > 0
        and all(isinstance(m, np.ndarray) and m.ndim == 2 for m in embeddings)
    )


def _unit_rows(embeddings: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """Float32 rows whose dot products are the cosines (averaged over embedders); zero rows stay 0."""
    mats = list(embeddings) if _is_matrix_list(embeddings) else [embeddings]
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
    z = _unit_rows(emb).astype(np.float64)
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


# ---------------------------------------------------------------- neighbour lists


def _rows_per_block(width: int) -> int:
    """Rows a blockwise scan may take so that a block holds about ``_BLOCK_ELEMS`` entries."""
    return max(1, _BLOCK_ELEMS // max(1, width))


def _top_k(sims: np.ndarray, k: int, cols: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest entries of each row (``sims`` is overwritten), by value desc then column asc."""
    if k > _ARGMAX_K:
        return _top_k_partition(sims, k, cols)
    rows = np.arange(len(sims))
    idx = np.empty((len(sims), k), dtype=np.int64)
    vals = np.empty((len(sims), k), dtype=sims.dtype)
    for t in range(k):
        best = np.argmax(sims, axis=1)
        idx[:, t] = best
        vals[:, t] = sims[rows, best]
        sims[rows, best] = -np.inf
    return (idx if cols is None else cols[idx]), vals


def _top_k_partition(sims: np.ndarray, k: int, cols: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Same as :func:`_top_k` through ``argpartition`` (faster when ``k`` is large)."""
    width = sims.shape[1]
    if k < width:
        idx = np.argpartition(sims, width - k, axis=1)[:, width - k :]
    else:
        idx = np.broadcast_to(np.arange(width), sims.shape).copy()
    vals = np.take_along_axis(sims, idx, axis=1)
    order = np.lexsort((idx, -vals), axis=-1)
    idx, vals = np.take_along_axis(idx, order, axis=1), np.take_along_axis(vals, order, axis=1)
    return (idx if cols is None else cols[idx]), vals


def _knn_exhaustive(z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k`` nearest neighbours of every row (self excluded), scanned in row blocks."""
    n = len(z)
    nbr = np.empty((n, k), dtype=np.int64)
    nsim = np.empty((n, k), dtype=np.float32)
    step = _rows_per_block(n)
    for start in range(0, n, step):
        stop = min(n, start + step)
        sims = z[start:stop] @ z.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        nbr[start:stop], nsim[start:stop] = _top_k(sims, k)
    return nbr, nsim


def _assign(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the most similar centroid for every row, in row blocks."""
    out = np.empty(len(x), dtype=np.int64)
    step = _rows_per_block(len(centroids))
    for start in range(0, len(x), step):
        out[start : start + step] = np.argmax(x[start : start + step] @ centroids.T, axis=1)
    return out


def _spherical_kmeans(z: np.ndarray, cells: int, seed: int) -> np.ndarray:
    """Unit centroids of a spherical k-means fitted on a seeded sample of the rows."""
    rng = np.random.default_rng(seed)
    size = min(len(z), cells * _KMEANS_SAMPLE)
    sample = z[np.sort(rng.choice(len(z), size=size, replace=False))]
    centroids = sample[rng.choice(size, size=cells, replace=False)].copy()
    for _ in range(_KMEANS_ITERS):
        labels = _assign(sample, centroids)
        onehot = coo_matrix((np.ones(size, np.float32), (labels, np.arange(size))), shape=(cells, size))
        sums = np.asarray(onehot.tocsr() @ sample, dtype=np.float32)
        norms = np.linalg.norm(sums, axis=1)
        keep = norms > 0
        centroids[keep] = sums[keep] / norms[keep, None]
    return centroids


def _knn_ivf(z: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Approximate ``k`` nearest neighbours: each k-means cell is scanned against its nearest cells."""
    n = len(z)
    cells = max(2, math.isqrt(n))
    centroids = _spherical_kmeans(z, cells, seed)
    assign = _assign(z, centroids)
    by_cell = np.argsort(assign, kind="stable")
    bounds = np.searchsorted(assign[by_cell], np.arange(cells + 1))
    members = [by_cell[bounds[c] : bounds[c + 1]] for c in range(cells)]
    csim = centroids @ centroids.T
    np.fill_diagonal(csim, np.inf)  # a cell always probes itself first
    probes = _top_k(csim, min(cells, _N_PROBE))[0]
    nbr = np.repeat(np.arange(n, dtype=np.int64)[:, None], k, axis=1)  # padding points at itself
    nsim = np.full((n, k), -np.inf, dtype=np.float32)
    for cell in range(cells):
        own = members[cell]
        cand = np.concatenate([members[p] for p in probes[cell]])
        kk = min(k, len(cand) - 1)
        if len(own) == 0 or kk < 1:
            continue
        zc = z[cand]
        step = _rows_per_block(len(cand))
        for start in range(0, len(own), step):
            rows = own[start : start + step]
            sims = z[rows] @ zc.T
            sims[np.arange(len(rows)), np.arange(start, start + len(rows))] = -np.inf
            nbr[rows, :kk], nsim[rows, :kk] = _top_k(sims, kk, cand)
    return nbr, nsim


# ---------------------------------------------------------------- Boruvka on neighbour lists


def _best_outside(z: np.ndarray, comp: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact best edge from each given row to a chunk of another component (row-block scan)."""
    best_sim = np.full(len(rows), -np.inf, dtype=np.float32)
    best_j = np.full(len(rows), -1, dtype=np.int64)
    step = _rows_per_block(len(z))
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        sims = z[part] @ z.T
        sims[comp[part][:, None] == comp[None, :]] = -np.inf
        j = np.argmax(sims, axis=1)
        best_sim[start : start + step] = sims[np.arange(len(part)), j]
        best_j[start : start + step] = j
    best_j[~np.isfinite(best_sim)] = -1
    return best_sim, best_j


def _listed_outside(comp: np.ndarray, nbr: np.ndarray, nsim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first listed neighbour in another component (-1 / -inf when there is none)."""
    outside = (comp[nbr] != comp[:, None]) & np.isfinite(nsim)
    has = outside.any(axis=1)
    first = outside.argmax(axis=1)
    rows = np.arange(len(comp))
    cand_j = np.where(has, nbr[rows, first], -1)
    cand_sim = np.where(has, nsim[rows, first], -np.inf).astype(np.float32)
    return cand_sim, cand_j


def _component_max(comp: np.ndarray, ncomp: int, values: np.ndarray) -> np.ndarray:
    """Maximum of ``values`` per component."""
    best = np.full(ncomp, -np.inf, dtype=np.float64)
    np.maximum.at(best, comp, values.astype(np.float64))
    return best


def _rows_to_rescan(
    comp: np.ndarray, ncomp: int, cand_j: np.ndarray, cand_sim: np.ndarray, bound: np.ndarray, certify: bool
) -> np.ndarray:
    """Rows whose best outside edge must be found by an exhaustive scan."""
    best = _component_max(comp, ncomp, cand_sim)
    unresolved = cand_j < 0
    if certify:
        return np.flatnonzero(unresolved & (bound >= best[comp]))
    stuck = unresolved & ~np.isfinite(best[comp])
    rows = np.flatnonzero(stuck)
    if len(rows) == 0:
        return rows
    rows = rows[np.lexsort((rows, -bound[rows].astype(np.float64), comp[rows]))]
    group = comp[rows]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    rank = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
    return np.sort(rows[rank < _FALLBACK_ROWS])


def _component_choices(comp: np.ndarray, cand_j: np.ndarray, cand_sim: np.ndarray) -> np.ndarray:
    """Per component, the row holding its best outside edge (similarity desc, then lowest pair)."""
    rows = np.arange(len(comp))
    lo, hi = np.minimum(rows, cand_j), np.maximum(rows, cand_j)
    order = np.lexsort((hi, lo, -cand_sim.astype(np.float64), comp))
    group = comp[order]
    chosen = order[np.r_[True, group[1:] != group[:-1]]]
    return chosen[cand_j[chosen] >= 0]


def _merge(
    comp: np.ndarray, ncomp: int, rows: np.ndarray, cand_j: np.ndarray, cand_sim: np.ndarray
) -> tuple[np.ndarray, int, list[tuple[int, int]]]:
    """Add the chosen edges best first, skipping any that would close a cycle; relabel components."""
    parent = list(range(ncomp))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    js = cand_j[rows]
    lo, hi = np.minimum(rows, js), np.maximum(rows, js)
    order = np.lexsort((hi, lo, -cand_sim[rows].astype(np.float64)))
    added: list[tuple[int, int]] = []
    for a, b in zip(lo[order].tolist(), hi[order].tolist(), strict=True):
        ra, rb = find(int(comp[a])), find(int(comp[b]))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
            added.append((a, b))
    roots = np.asarray([find(c) for c in range(ncomp)], dtype=np.int64)
    _, relabel = np.unique(roots, return_inverse=True)
    return relabel[comp], int(relabel.max()) + 1, added


def _boruvka(z: np.ndarray, nbr: np.ndarray, nsim: np.ndarray, *, certify: bool) -> np.ndarray:
    """Spanning-tree edges (``N - 1`` x 2) grown by Boruvka rounds over the neighbour lists."""
    n = len(z)
    complete = nbr.shape[1] >= n - 1
    bound = np.full(n, -np.inf, dtype=np.float32) if complete else nsim[:, -1].copy()
    comp = np.arange(n, dtype=np.int64)
    ncomp = n
    edges: list[tuple[int, int]] = []
    while ncomp > 1:
        cand_sim, cand_j = _listed_outside(comp, nbr, nsim)
        rescan = _rows_to_rescan(comp, ncomp, cand_j, cand_sim, bound, certify)
        if len(rescan):
            cand_sim[rescan], cand_j[rescan] = _best_outside(z, comp, rescan)
        chosen = _component_choices(comp, cand_j, cand_sim)
        comp, ncomp, added = _merge(comp, ncomp, chosen, cand_j, cand_sim)
        edges.extend(added)
    return np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def default_k(n: int) -> int:
    """Neighbour-list length used by the sparse path when ``k`` is not given."""
    return max(1, min(n - 1, 16))


def _sparse_tree(
    z: np.ndarray, temperature: float | None, k: int | None, exhaustive_max: int, seed: int
) -> ChowLiuTree:
    """Spanning tree from k-nearest-neighbour lists (exhaustive or inverted-file) and Boruvka."""
    n = len(z)
    k = default_k(n) if k is None else max(1, min(int(k), n - 1))
    certify = n <= exhaustive_max
    nbr, nsim = _knn_exhaustive(z, k) if certify else _knn_ivf(z, k, seed)
    pairs = _boruvka(z, nbr, nsim, certify=certify)
    return _make_tree(z, pairs[:, 0], pairs[:, 1], temperature, "sparse", certify)


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
    z = _unit_rows(embeddings)
    if len(z) == 0:
        raise ValueError("cannot build a tree over zero chunks")
    if len(z) == 1:
        return ChowLiuTree(1, [], "exact", True)
    if len(z) <= exact_max:
        return _exact_tree(z, temperature)
    return _sparse_tree(z, temperature, k, exhaustive_max, seed)


# ---------------------------------------------------------------- roots and traversals


def _query_vector(query_sim: Any, n: int) -> np.ndarray:
    """``query_sim`` as a finite float64 vector of length ``n``."""
    q = np.asarray(query_sim, dtype=np.float64).reshape(-1)
    if q.shape != (n,):
        raise ValueError(f"query_sim must have one value per chunk ({n}), got {q.shape[0]}")
    if not np.isfinite(q).all():
        raise ValueError("query_sim contains NaN or infinite values")
    return q


def choose_root(tree: ChowLiuTree, *, strategy: str = "query", query_sim: np.ndarray | None = None) -> int:
    """Root chunk: most query-similar ("query"), highest degree, or highest adjacent-weight sum."""
    if strategy not in ROOT_STRATEGIES:
        raise ValueError(f"unknown root strategy {strategy!r}; expected one of {', '.join(ROOT_STRATEGIES)}")
    if strategy == "query" and query_sim is None:
        strategy = "weight"
    if strategy == "query":
        scores = _query_vector(query_sim, tree.n)
    elif strategy == "degree":
        scores = tree.degrees().astype(np.float64)
    else:
        scores = tree.weight_sums()
    return int(np.argmax(scores))


def _child_key(children: str, q: np.ndarray | None) -> Any:
    """Sort key over ``(node, weight)`` pairs: best first, lowest index on ties."""
    if children == "weight":
        return lambda item: (-item[1], item[0])
    if children == "relevance":
        if q is None:
            raise ValueError('children="relevance" needs query_sim')
        return lambda item: (-q[item[0]], item[0])
    raise ValueError(f"unknown children order {children!r}; expected one of {', '.join(CHILD_ORDERS)}")


def traverse(
    tree: ChowLiuTree,
    root: int,
    *,
    method: str = "bfs",
    children: str = "weight",
    query_sim: np.ndarray | None = None,
) -> list[int]:
    """Visit order from ``root`` (BFS or pre-order DFS), children by edge weight or query relevance."""
    if method not in TRAVERSALS:
        raise ValueError(f"unknown traversal {method!r}; expected one of {', '.join(TRAVERSALS)}")
    root = int(root)
    if not 0 <= root < tree.n:
        raise ValueError(f"root {root} is not a node of a tree over {tree.n} chunks")
    q = None if query_sim is None else _query_vector(query_sim, tree.n)
    key = _child_key(children, q)
    adj = [sorted(nbrs, key=key) for nbrs in tree.adjacency()]
    return _bfs(adj, root) if method == "bfs" else _dfs(adj, root)


def _bfs(adj: list[list[tuple[int, float]]], root: int) -> list[int]:
    """Breadth-first order over sorted neighbour lists."""
    seen = [False] * len(adj)
    seen[root] = True
    out, queue = [], deque([root])
    while queue:
        node = queue.popleft()
        out.append(node)
        for child, _ in adj[node]:
            if not seen[child]:
                seen[child] = True
                queue.append(child)
    return out


def _dfs(adj: list[list[tuple[int, float]]], root: int) -> list[int]:
    """Pre-order depth-first order over sorted neighbour lists."""
    seen = [False] * len(adj)
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if seen[node]:
            continue
        seen[node] = True
        out.append(node)
        stack.extend(child for child, _ in reversed(adj[node]) if not seen[child])
    return out


def multi_roots(tree: ChowLiuTree, query_sim: np.ndarray, n_roots: int = 3, *, min_hops: int = 2) -> list[int]:
    """Distinct roots for multi-root voting: most query-similar first, at least ``min_hops`` apart."""
    if n_roots < 1:
        raise ValueError("n_roots must be at least 1")
    q = _query_vector(query_sim, tree.n)
    ranked = np.argsort(-q, kind="stable").tolist()
    graph = tree.to_csr()
    hops = np.full(tree.n, np.inf)
    chosen: list[int] = []
    for node in ranked:
        if len(chosen) == min(n_roots, tree.n):
            break
        if hops[node] >= min_hops:
            chosen.append(node)
            hops = np.minimum(hops, shortest_path(graph, directed=False, unweighted=True, indices=node))
    chosen += [node for node in ranked if node not in chosen][: min(n_roots, tree.n) - len(chosen)]
    return chosen


# ---------------------------------------------------------------- orders


def _section_runs(sections: Sequence[str], n: int) -> list[np.ndarray]:
    """Index runs of consecutive chunks sharing a section label, in document order."""
    if len(sections) != n:
        raise ValueError(f"sections must have one label per chunk ({n}), got {len(sections)}")
    runs: list[list[int]] = []
    for i, label in enumerate(sections):
        if runs and sections[i - 1] == label:
            runs[-1].append(i)
        else:
            runs.append([i])
    return [np.asarray(run, dtype=np.int64) for run in runs]


def _subset_embeddings(embeddings: np.ndarray | Sequence[np.ndarray], idx: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """Rows ``idx`` of one embedding matrix or of each of several."""
    if _is_matrix_list(embeddings):
        return [m[idx] for m in embeddings]
    return np.asarray(embeddings)[idx]


def restrict_tree(tree: ChowLiuTree, idx: np.ndarray) -> ChowLiuTree:
    """Tree over the chunks ``idx`` (local ids): induced edges, pieces linked in order by 0-weight edges."""
    local = {int(g): pos for pos, g in enumerate(idx.tolist())}
    edges = [(local[i], local[j], w) for i, j, w in tree.edges if i in local and j in local]
    m = len(idx)
    if m > 1 and len(edges) < m - 1:
        pairs = np.asarray([e[:2] for e in edges], dtype=np.int64).reshape(-1, 2)
        graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(m, m))
        labels = connected_components(graph, directed=False)[1]
        heads = np.sort(np.unique(labels, return_index=True)[1])
        edges += [(int(a), int(b), 0.0) for a, b in itertools.pairwise(heads.tolist())]
    return ChowLiuTree(m, edges, tree.method, False)


def _section_tree(
    idx: np.ndarray,
    tree: ChowLiuTree | None,
    embeddings: np.ndarray | Sequence[np.ndarray] | None,
    temperature: float | None,
) -> ChowLiuTree:
    """Tree of one section: built on its own embeddings, else restricted from the document tree."""
    if embeddings is not None:
        return build_tree(_subset_embeddings(embeddings, idx), temperature=temperature)
    if tree is not None:
        return restrict_tree(tree, idx)
    raise ValueError('order "hybrid" needs a tree or embeddings')


def _hybrid_order(
    n: int,
    sections: Sequence[str] | None,
    tree: ChowLiuTree | None,
    embeddings: np.ndarray | Sequence[np.ndarray] | None,
    q: np.ndarray | None,
    root: str | int,
    children: str,
    temperature: float | None,
) -> list[int]:
    """Chow-Liu BFS inside each section, sections in document order."""
    if sections is None:
        raise ValueError('order "hybrid" needs sections (one label per chunk)')
    if not isinstance(root, str):
        raise ValueError('order "hybrid" takes a root strategy name, not a chunk index')
    if embeddings is not None and len(_unit_rows(embeddings)) != n:
        raise ValueError(f"hybrid: embeddings must have one row per chunk ({n})")
    if embeddings is None and tree is not None and tree.n != n:
        raise ValueError(f"the tree covers {tree.n} chunks, expected {n}")
    out: list[int] = []
    for idx in _section_runs(sections, n):
        sub = _section_tree(idx, tree, embeddings, temperature)
        q_sub = None if q is None else q[idx]
        start = choose_root(sub, strategy=root, query_sim=q_sub)
        out.extend(idx[traverse(sub, start, method="bfs", children=children, query_sim=q_sub)].tolist())
    return out


def _chow_liu_order(
    n: int,
    method: str,
    tree: ChowLiuTree | None,
    embeddings: np.ndarray | Sequence[np.ndarray] | None,
    q: np.ndarray | None,
    root: str | int,
    children: str,
    temperature: float | None,
) -> list[int]:
    """Chow-Liu traversal of the whole document (building the tree from embeddings when needed)."""
    if tree is None:
        if embeddings is None:
            raise ValueError("Chow-Liu orders need a tree or embeddings")
        tree = build_tree(embeddings, temperature=temperature)
    if tree.n != n:
        raise ValueError(f"the tree covers {tree.n} chunks, expected {n}")
    start = root if isinstance(root, int | np.integer) else choose_root(tree, strategy=root, query_sim=q)
    return traverse(tree, int(start), method=method, children=children, query_sim=q)


def order_chunks(
    order: str,
    *,
    n: int,
    tree: ChowLiuTree | None = None,
    query_sim: np.ndarray | None = None,
    sections: Sequence[str] | None = None,
    root: str | int = "query",
    children: str = "weight",
    seed: int = 0,
    embeddings: np.ndarray | Sequence[np.ndarray] | None = None,
    temperature: float | None = None,
) -> list[int]:
    """A permutation of ``range(n)``: the order in which worker agents read the chunks."""
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; expected one of {', '.join(ORDERS)}")
    if n < 0:
        raise ValueError("n must be >= 0")
    if n == 0:
        return []
    q = None if query_sim is None else _query_vector(query_sim, n)
    if order == "original":
        return list(range(n))
    if order == "reverse":
        return list(range(n - 1, -1, -1))
    if order == "random":
        return np.random.default_rng(seed).permutation(n).tolist()
    if order == "relevance":
        if q is None:
            raise ValueError('order "relevance" needs query_sim')
        return np.argsort(-q, kind="stable").tolist()
    if order == "hybrid":
        return _hybrid_order(n, sections, tree, embeddings, q, root, children, temperature)
    if order == "best-first":
        from nodes.reading import best_first_order  # nodes.reading builds on this module's tree

        if q is None:
            raise ValueError('order "best-first" needs query_sim')
        if tree is None:
            if embeddings is None:
                raise ValueError("Chow-Liu orders need a tree or embeddings")
            tree = build_tree(embeddings, temperature=temperature)
        start = root if isinstance(root, int | np.integer) else None
        return best_first_order(tree, q, root=start)
    method = "bfs" if order == "chow-liu-bfs" else "dfs"
    return _chow_liu_order(n, method, tree, embeddings, q, root, children, temperature)
