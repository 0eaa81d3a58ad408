"""Chunk orders: the permutation in which the worker agents read a document's chunks.

Chow-Liu orders walk the tree (:mod:`nodes.chain.ordering.traverse`), ``hybrid`` walks a tree inside each
section, ``best-first`` is :func:`nodes.chain.reading.best_first_order`, and the fixed baselines
(document order, reverse, random, relevance) need no tree. The relevance order breaks ties towards
the lower chunk index.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from nodes.chain.ordering.traverse import choose_root, query_vector, traverse
from nodes.chain.ordering.tree import ChowLiuTree, build_tree, is_matrix_list, unit_rows
from nodes.chain.reading import best_first_order

ORDERS = ("best-first", "chow-liu-bfs", "chow-liu-dfs", "original", "reverse", "random", "relevance", "hybrid")
"""Chunk orders understood by :func:`order_chunks` (``best-first``: see :mod:`nodes.chain.reading`)."""


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
    if is_matrix_list(embeddings):
        return [m[idx] for m in embeddings]
    return np.asarray(np.asarray(embeddings)[idx])


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


@dataclass(frozen=True)
class _Walk:
    """What a Chow-Liu traversal starts from: the tree (or the embeddings to build it), the query and the rules."""

    tree: ChowLiuTree | None
    embeddings: np.ndarray | Sequence[np.ndarray] | None
    q: np.ndarray | None
    root: str | int
    children: str
    temperature: float | None


def _hybrid_order(n: int, sections: Sequence[str] | None, walk: _Walk) -> list[int]:
    """Chow-Liu BFS inside each section, sections in document order."""
    tree, embeddings, q, root, children = walk.tree, walk.embeddings, walk.q, walk.root, walk.children
    if sections is None:
        raise ValueError('order "hybrid" needs sections (one label per chunk)')
    if not isinstance(root, str):
        raise ValueError('order "hybrid" takes a root strategy name, not a chunk index')
    if embeddings is not None and len(unit_rows(embeddings)) != n:
        raise ValueError(f"hybrid: embeddings must have one row per chunk ({n})")
    if embeddings is None and tree is not None and tree.n != n:
        raise ValueError(f"the tree covers {tree.n} chunks, expected {n}")
    out: list[int] = []
    for idx in _section_runs(sections, n):
        sub = _section_tree(idx, tree, embeddings, walk.temperature)
        q_sub = None if q is None else q[idx]
        start = choose_root(sub, strategy=root, query_sim=q_sub)
        out.extend(idx[traverse(sub, start, method="bfs", children=children, query_sim=q_sub)].tolist())
    return out


def _chow_liu_order(n: int, method: str, walk: _Walk) -> list[int]:
    """Chow-Liu traversal of the whole document (building the tree from embeddings when needed)."""
    tree, embeddings, q, root, temperature = walk.tree, walk.embeddings, walk.q, walk.root, walk.temperature
    if tree is None:
        if embeddings is None:
            raise ValueError("Chow-Liu orders need a tree or embeddings")
        tree = build_tree(embeddings, temperature=temperature)
    if tree.n != n:
        raise ValueError(f"the tree covers {tree.n} chunks, expected {n}")
    start = root if isinstance(root, int | np.integer) else choose_root(tree, strategy=root, query_sim=q)
    return traverse(tree, int(start), method=method, children=walk.children, query_sim=q)


def _best_first(
    tree: ChowLiuTree | None,
    embeddings: np.ndarray | Sequence[np.ndarray] | None,
    q: np.ndarray | None,
    root: str | int,
    temperature: float | None,
) -> list[int]:
    """Best-first order over the Chow-Liu tree (built from embeddings when needed), led by the query."""
    if q is None:
        raise ValueError('order "best-first" needs query_sim')
    if tree is None:
        if embeddings is None:
            raise ValueError("Chow-Liu orders need a tree or embeddings")
        tree = build_tree(embeddings, temperature=temperature)
    start = root if isinstance(root, int | np.integer) else None
    return best_first_order(tree, q, root=start)


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
    q = None if query_sim is None else query_vector(query_sim, n)
    if order == "original":
        return list(range(n))
    if order == "reverse":
        return list(range(n - 1, -1, -1))
    if order == "random":
        return [int(i) for i in np.random.default_rng(seed).permutation(n)]
    if order == "relevance":
        if q is None:
            raise ValueError('order "relevance" needs query_sim')
        return [int(i) for i in np.argsort(-q, kind="stable")]
    walk = _Walk(tree, embeddings, q, root, children, temperature)
    if order == "hybrid":
        return _hybrid_order(n, sections, walk)
    if order == "best-first":
        return _best_first(tree, embeddings, q, root, temperature)
    return _chow_liu_order(n, "bfs" if order == "chow-liu-bfs" else "dfs", walk)
