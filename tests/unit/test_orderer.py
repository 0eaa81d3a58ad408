"""Chow-Liu tree construction and chunk orders, on random numpy data only."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest

from nodes.chain.ordering.orders import ORDERS, order_chunks, restrict_tree
from nodes.chain.ordering.traverse import choose_root, multi_roots, traverse
from nodes.chain.ordering.tree import ChowLiuTree, build_tree, similarity_weights


def _gaussian(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def _clustered(n: int, dim: int = 64, clusters: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    labels = rng.integers(0, clusters, n)
    return (centres[labels] + 0.6 * rng.standard_normal((n, dim))).astype(np.float32)


def _networkx_max_weight(weights: np.ndarray) -> float:
    """Total weight of networkx's maximum spanning tree over the complete graph (zero weights kept)."""
    graph = nx.Graph()
    n = len(weights)
    graph.add_nodes_from(range(n))
    graph.add_weighted_edges_from((i, j, weights[i, j]) for i, j in itertools.combinations(range(n), 2))
    tree = nx.maximum_spanning_tree(graph)
    return sum(d["weight"] for _, _, d in tree.edges(data=True))


def _assert_spanning(tree: ChowLiuTree, n: int) -> None:
    assert tree.n == n
    assert len(tree.edges) == n - 1
    assert all(0 <= i < j < n for i, j, _ in tree.edges)
    assert nx.is_tree(tree.to_networkx())


def _is_permutation(order: list[int], n: int) -> bool:
    return sorted(order) == list(range(n)) and all(type(i) is int for i in order)


# ---------------------------------------------------------------- weights


def test_similarity_weights_clip_diagonal_and_temperature():
    emb = _gaussian(40, 8)
    weights = similarity_weights(emb)
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    cos = unit.astype(np.float64) @ unit.T.astype(np.float64)
    assert np.allclose(np.diag(weights), 0.0)
    off = ~np.eye(40, dtype=bool)
    assert np.allclose(weights[off], np.maximum(cos[off], 0.0), atol=1e-6)
    assert (cos[off] < 0).any()

    sharp = similarity_weights(emb, temperature=0.1)
    assert np.allclose(np.diag(sharp), 0.0)
    positive = off & (cos > 0)
    assert np.allclose(sharp[positive], np.exp(cos[positive] / 0.1), rtol=1e-5)
    assert np.all(sharp[off & (cos <= 0)] == 0.0)
    assert np.allclose(sharp, sharp.T)


def test_several_embedders_average_their_similarity():
    a, b = _gaussian(30, 16, seed=1), _gaussian(30, 24, seed=2)
    expected = np.maximum((_cos(a) + _cos(b)) / 2, 0.0)
    np.fill_diagonal(expected, 0.0)
    assert np.allclose(similarity_weights([a, b]), expected, atol=1e-6)
    with pytest.raises(ValueError):
        similarity_weights([a, b[:10]])


def _cos(x: np.ndarray) -> np.ndarray:
    unit = x.astype(np.float64) / np.linalg.norm(x, axis=1, keepdims=True)
    return unit @ unit.T


def test_bad_temperature_and_bad_input_raise():
    emb = _gaussian(5)
    for bad in (0.0, -1.0, float("nan"), 1e-6):
        with pytest.raises(ValueError):
            build_tree(emb, temperature=bad)
    with pytest.raises(ValueError):
        build_tree(np.zeros((0, 8)))
    with pytest.raises(ValueError):
        build_tree(np.ones(8))
    with pytest.raises(ValueError):
        build_tree(np.array([[1.0, np.nan], [0.0, 1.0]]))


# ---------------------------------------------------------------- exact tree


@pytest.mark.parametrize("n,temperature", [(2, None), (25, None), (80, None), (80, 0.2)])
def test_exact_tree_matches_networkx(n, temperature):
    emb = _gaussian(n, 16, seed=n)
    tree = build_tree(emb, temperature=temperature)
    _assert_spanning(tree, n)
    assert tree.method == "exact" and tree.certified
    weights = similarity_weights(emb, temperature=temperature)
    assert tree.total_weight == pytest.approx(_networkx_max_weight(weights), rel=1e-9, abs=1e-9)
    for i, j, w in tree.edges:
        assert w == pytest.approx(weights[i, j], rel=1e-6, abs=1e-9)


def test_temperature_changes_weights_not_structure():
    emb = _gaussian(60, 12, seed=3)
    plain, sharp = build_tree(emb), build_tree(emb, temperature=0.05)
    assert [e[:2] for e in plain.edges] == [e[:2] for e in sharp.edges]
    assert sharp.total_weight > plain.total_weight


def test_single_chunk_has_no_edges():
    tree = build_tree(np.ones((1, 4)))
    assert tree.n == 1 and tree.edges == [] and tree.total_weight == 0.0
    assert traverse(tree, 0) == [0]
    assert order_chunks("chow-liu-dfs", n=1, tree=tree, query_sim=np.array([0.3])) == [0]


def test_zero_weights_still_give_a_spanning_tree():
    # Orthogonal and opposite vectors: every clipped weight is 0; scipy must not drop the edges.
    emb = np.vstack([np.eye(6), -np.eye(6)]).astype(np.float32)
    for tree in (build_tree(emb), build_tree(emb, exact_max=0, k=2)):
        _assert_spanning(tree, 12)
        assert tree.total_weight == 0.0


def test_zero_vectors_are_joined():
    emb = _gaussian(50, 8, seed=4)
    emb[::5] = 0.0
    exact, sparse = build_tree(emb), build_tree(emb, exact_max=0, k=3)
    _assert_spanning(exact, 50)
    _assert_spanning(sparse, 50)
    assert sparse.total_weight == pytest.approx(exact.total_weight, rel=1e-6)
    assert sparse.total_weight == pytest.approx(_networkx_max_weight(similarity_weights(emb)), rel=1e-6)
    all_zero = build_tree(np.zeros((7, 4)), exact_max=0)
    _assert_spanning(all_zero, 7)
    assert all_zero.total_weight == 0.0


def test_identical_vectors_and_ties_are_deterministic():
    base = _gaussian(4, 8, seed=5)
    emb = np.repeat(base, 25, axis=0)
    exact = build_tree(emb)
    assert exact.edges == build_tree(emb.copy()).edges
    sparse = build_tree(emb, exact_max=0, k=3)
    assert sparse.edges == build_tree(emb.copy(), exact_max=0, k=3).edges
    _assert_spanning(exact, 100)
    _assert_spanning(sparse, 100)
    reference = _networkx_max_weight(similarity_weights(emb))
    assert exact.total_weight == pytest.approx(reference, rel=1e-6)
    assert sparse.total_weight == pytest.approx(reference, rel=1e-6)


# ---------------------------------------------------------------- sparse tree


@pytest.mark.parametrize(
    "n,dim,seeds",
    [(300, 32, (0, 1, 2)), (1000, 64, (0, 1, 2)), (1000, 384, (7,)), (2000, 48, (0, 1))],
)
def test_sparse_total_weight_equals_exact(n, dim, seeds):
    for seed in seeds:
        emb = _gaussian(n, dim, seed=seed)
        exact = build_tree(emb)
        sparse = build_tree(emb, exact_max=n - 1, seed=seed)
        assert sparse.method == "sparse" and sparse.certified
        _assert_spanning(sparse, n)
        assert sparse.total_weight == pytest.approx(exact.total_weight, rel=1e-6)


@pytest.mark.parametrize("k", [1, 2, 5, 64])
def test_sparse_is_exact_for_any_k(k):
    emb = _clustered(600, seed=k)
    exact = build_tree(emb, temperature=0.3)
    sparse = build_tree(emb, temperature=0.3, exact_max=0, k=k)
    _assert_spanning(sparse, 600)
    assert sparse.total_weight == pytest.approx(exact.total_weight, rel=1e-6)


def test_sparse_with_several_embedders_equals_exact():
    a, b = _gaussian(400, 16, seed=8), _gaussian(400, 40, seed=9)
    exact, sparse = build_tree([a, b]), build_tree([a, b], exact_max=0, k=4)
    assert sparse.total_weight == pytest.approx(exact.total_weight, rel=1e-6)


def test_inverted_file_path_is_approximate_but_spanning():
    emb = _clustered(2000, seed=11)
    approx = build_tree(emb, exact_max=0, exhaustive_max=0, seed=3)
    _assert_spanning(approx, 2000)
    assert approx.method == "sparse" and not approx.certified
    assert approx.edges == build_tree(emb.copy(), exact_max=0, exhaustive_max=0, seed=3).edges
    exact = build_tree(emb, exact_max=0)
    assert exact.certified
    assert approx.total_weight <= exact.total_weight + 1e-6
    assert approx.total_weight >= 0.99 * exact.total_weight


# ---------------------------------------------------------------- tree object


def test_dict_round_trip_and_validation():
    tree = build_tree(_gaussian(20, seed=12), exact_max=5)
    data = json.loads(json.dumps(tree.to_dict()))
    again = ChowLiuTree.from_dict(data)
    assert again == tree and again.method == "sparse"
    assert again.total_weight == pytest.approx(tree.total_weight)
    with pytest.raises(ValueError):
        ChowLiuTree(3, [(0, 1, 0.5)])
    with pytest.raises(ValueError):
        ChowLiuTree(4, [(0, 1, 0.5), (1, 0, 0.4), (2, 3, 0.1)])
    with pytest.raises(ValueError):
        ChowLiuTree(3, [(0, 1, 0.5), (1, 5, 0.4)])
    with pytest.raises(ValueError):
        ChowLiuTree(2, [(0, 1, 0.5)], method="fast")


def test_edges_are_normalised_and_networkx_export():
    tree = ChowLiuTree(3, [(2, 1, 0.3), (1, 0, 0.7)])
    assert tree.edges == [(0, 1, 0.7), (1, 2, 0.3)]
    graph = tree.to_networkx()
    assert graph[1][2]["weight"] == 0.3
    assert tree.degrees().tolist() == [1, 2, 1]
    assert tree.weight_sums() == pytest.approx([0.7, 1.0, 0.3])


# ---------------------------------------------------------------- roots and traversal


def _star_with_tail() -> ChowLiuTree:
    # 0 is the hub (0-1 0.9, 0-2 0.5, 0-3 0.4); 1 continues to 4 (0.8); 4 to 5 (0.7).
    return ChowLiuTree(6, [(0, 1, 0.9), (0, 2, 0.5), (0, 3, 0.4), (1, 4, 0.8), (4, 5, 0.7)])


def test_root_strategies():
    tree = _star_with_tail()
    query = np.array([0.1, 0.2, 0.3, 0.9, 0.0, 0.5])
    assert choose_root(tree, query_sim=query) == 3
    assert choose_root(tree, strategy="degree") == 0
    assert choose_root(tree, strategy="weight") == 0  # 0.9 + 0.5 + 0.4
    assert choose_root(tree, strategy="query") == choose_root(tree, strategy="weight")
    path = ChowLiuTree(4, [(0, 1, 0.5), (1, 2, 0.9), (2, 3, 0.5)])
    assert choose_root(path, strategy="degree") == 1  # nodes 1 and 2 tie: lowest index
    assert choose_root(path, strategy="weight") == 1
    assert choose_root(path, query_sim=np.zeros(4)) == 0
    with pytest.raises(ValueError):
        choose_root(path, strategy="centre")
    with pytest.raises(ValueError):
        choose_root(path, query_sim=np.zeros(3))


def test_bfs_and_dfs_on_path_and_star():
    path = ChowLiuTree(5, [(0, 1, 0.5), (1, 2, 0.5), (2, 3, 0.5), (3, 4, 0.5)])
    assert traverse(path, 0, method="bfs") == traverse(path, 0, method="dfs") == [0, 1, 2, 3, 4]
    star = ChowLiuTree(4, [(0, 1, 0.2), (0, 2, 0.9), (0, 3, 0.5)])
    assert traverse(star, 0, method="bfs") == traverse(star, 0, method="dfs") == [0, 2, 3, 1]
    tree = _star_with_tail()
    assert traverse(tree, 0, method="bfs") == [0, 1, 2, 3, 4, 5]
    assert traverse(tree, 0, method="dfs") == [0, 1, 4, 5, 2, 3]
    middle = traverse(path, 2, method="bfs"), traverse(path, 2, method="dfs")
    assert middle == ([2, 1, 3, 0, 4], [2, 1, 0, 3, 4])


def test_children_by_relevance():
    tree = _star_with_tail()
    query = np.array([0.0, 0.1, 0.9, 0.8, 0.2, 0.3])
    assert traverse(tree, 0, children="relevance", query_sim=query) == [0, 2, 3, 1, 4, 5]
    assert traverse(tree, 0, method="dfs", children="relevance", query_sim=query) == [0, 2, 3, 1, 4, 5]
    with pytest.raises(ValueError):
        traverse(tree, 0, children="relevance")
    with pytest.raises(ValueError):
        traverse(tree, 0, method="zigzag")
    with pytest.raises(ValueError):
        traverse(tree, 6)


def test_multi_roots_are_distinct_and_spread():
    tree = _star_with_tail()
    query = np.array([0.9, 0.8, 0.1, 0.7, 0.6, 0.5])
    roots = multi_roots(tree, query, n_roots=3)
    assert roots[0] == 0 and len(set(roots)) == 3
    # 1 and 3 are adjacent to 0, so the next roots are 4 (two hops away) and then the best remaining.
    assert roots == [0, 4, 1]
    assert sorted(multi_roots(tree, query, n_roots=10)) == list(range(6))
    with pytest.raises(ValueError):
        multi_roots(tree, query, n_roots=0)


# ---------------------------------------------------------------- orders


def test_every_order_is_a_permutation():
    n = 60
    emb = _clustered(n, dim=16, clusters=4, seed=13)
    query = emb @ np.random.default_rng(1).standard_normal(16)
    tree = build_tree(emb)
    sections = [f"s{i // 15}" for i in range(n)]
    for order in ORDERS:
        out = order_chunks(order, n=n, tree=tree, query_sim=query, sections=sections)
        assert _is_permutation(out, n), order
    assert order_chunks("original", n=n) == list(range(n))
    assert order_chunks("reverse", n=n) == list(range(n - 1, -1, -1))
    assert order_chunks("original", n=0) == []


def test_chow_liu_orders_follow_the_tree_and_root():
    emb = _gaussian(40, seed=14)
    query = np.random.default_rng(2).random(40)
    tree = build_tree(emb)
    bfs = order_chunks("chow-liu-bfs", n=40, tree=tree, query_sim=query)
    assert bfs[0] == int(np.argmax(query))
    assert bfs == traverse(tree, bfs[0], method="bfs")
    dfs = order_chunks("chow-liu-dfs", n=40, embeddings=emb, query_sim=query, root="degree")
    assert dfs == traverse(tree, choose_root(tree, strategy="degree"), method="dfs")
    assert order_chunks("chow-liu-bfs", n=40, tree=tree, root=7)[0] == 7
    with pytest.raises(ValueError):
        order_chunks("chow-liu-bfs", n=40)
    with pytest.raises(ValueError):
        order_chunks("chow-liu-bfs", n=41, tree=tree)


def test_random_is_seeded_and_relevance_is_stable():
    first, again = order_chunks("random", n=30, seed=3), order_chunks("random", n=30, seed=3)
    assert first == again and first != order_chunks("random", n=30, seed=4)
    query = np.array([0.2, 0.9, 0.2, 0.9, 0.5])
    assert order_chunks("relevance", n=5, query_sim=query) == [1, 3, 4, 0, 2]
    with pytest.raises(ValueError):
        order_chunks("relevance", n=5)


def test_hybrid_keeps_sections_in_document_order():
    n = 45
    emb = _gaussian(n, 8, seed=15)
    query = np.random.default_rng(3).random(n)
    sections = ["intro"] * 10 + ["method"] * 20 + ["intro"] * 15  # a repeated title is a new section
    runs = [range(0, 10), range(10, 30), range(30, 45)]
    tree = build_tree(emb)
    for kwargs in ({"embeddings": emb}, {"tree": tree}):
        out = order_chunks("hybrid", n=n, query_sim=query, sections=sections, **kwargs)
        assert _is_permutation(out, n)
        pos = 0
        for run in runs:
            block = out[pos : pos + len(run)]
            assert sorted(block) == list(run)
            assert block[0] == max(run, key=lambda i: query[i])
            pos += len(run)
    with pytest.raises(ValueError):
        order_chunks("hybrid", n=n, tree=tree)
    with pytest.raises(ValueError):
        order_chunks("hybrid", n=n, tree=tree, sections=sections[:-1])
    with pytest.raises(ValueError):
        order_chunks("hybrid", n=n, sections=sections)
    with pytest.raises(ValueError):
        order_chunks("hybrid", n=n, embeddings=emb[:-1], sections=sections)


def test_restrict_tree_links_pieces():
    tree = ChowLiuTree(5, [(0, 2, 0.9), (1, 2, 0.8), (2, 3, 0.7), (3, 4, 0.6)])
    sub = restrict_tree(tree, np.array([0, 1, 4]))
    _assert_spanning(sub, 3)
    assert sub.total_weight == 0.0 and not sub.certified


def test_unknown_order_lists_valid_names():
    with pytest.raises(ValueError) as err:
        order_chunks("alphabetical", n=3)
    for name in ORDERS:
        assert name in str(err.value)


def test_sparse_path_never_holds_a_dense_matrix(monkeypatch):
    import tracemalloc

    import nodes.chain.ordering.neighbours as neighbours

    monkeypatch.setattr(neighbours, "_BLOCK_ELEMS", 1 << 18)
    n = 3000
    emb = _clustered(n, dim=16, seed=16)
    tracemalloc.start()
    try:
        tree = build_tree(emb, exact_max=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_spanning(tree, n)
    assert peak < n * n * 4 / 4  # a quarter of one N x N float32 matrix (36 MB)
