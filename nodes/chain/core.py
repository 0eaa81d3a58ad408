"""Chain-of-Agents agents: the orderer, the workers and the manager, plus the retrieval baselines.

The orderer builds (once per document, cached) the Chow-Liu tree over the chunk embeddings and
turns it into the order the workers read the chunks in; only the root and the traversal depend
on the question. Each worker reads one chunk, the question and the previous worker's notes (the
communication unit) and writes new notes; a worker whose chunk holds nothing relevant passes the
notes on unchanged. The manager answers from the last notes with citations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, Field, WithJsonSchema

import prompts
from nodes.chain.ordering.orders import order_chunks
from nodes.chain.ordering.traverse import multi_roots
from nodes.chain.ordering.tree import ChowLiuTree, build_tree
from nodes.chain.passages import Passage, check_quotes, label_order, sentence_index
from nodes.chain.reading import nothing_missing
from nodes.ingest import index_document
from stores.documents import DocumentInfo, cache_path, document_text, get_document, index_identity, write_atomic
from stores.loaders import load_text
from stores.models import LLM, messages
from stores.settings import InputError
from stores.text import content_words, count_tokens, truncate_tokens
from stores.vectorstore import Hit, VectorStore, get_store

_QUOTE_LINE = re.compile(r"^\[(c\d+\.\d+)\] ")
_REF = re.compile(r"\[(c\d+(?:\.\d+)?)\]")


class Answer(BaseModel):
    """What the manager (or a single reader) returns."""

    answer: str = Field(description="shortest complete answer, or 'unknown'")
    evidence: list[str] = Field(default_factory=list, description="ids of supporting pieces, e.g. c3")
    explanation: str = Field(default="", description="one sentence citing the ids in brackets")


@dataclass
class DocumentVectors:
    """A document's chunks (ids, sections) and their embeddings, in document order."""

    info: DocumentInfo
    chunk_ids: list[str]
    sections: list[str]
    matrix: np.ndarray


def document_vectors(store: VectorStore, doc_id: str) -> DocumentVectors:
    """Chunk ids, sections and embeddings of an ingested document."""
    info = get_document(store.namespace, doc_id)
    hits = store.by_doc(doc_id, with_embeddings=True)
    if not hits:
        raise InputError(f"document {doc_id!r} has no chunks in namespace {store.namespace!r}; ingest it first")
    matrix = np.asarray([h.embedding for h in hits], dtype=np.float32)
    return DocumentVectors(info, [h.chunk_id for h in hits], [h.section for h in hits], matrix)


def _extra_vectors(namespace: str, doc_id: str, embedder: str, expected: list[str]) -> np.ndarray:
    """Embeddings of the same document in another embedder's space (indexed there on first use)."""
    store = get_store(namespace, embedder)
    info = get_document(namespace, doc_id)
    if store.count(doc_id=doc_id, kind="chunk") != len(expected):
        text = document_text(namespace, doc_id)
        index_document(
            load_text(text, title=info.title, source=info.source),
            store,
            chunk_size=info.chunk_size,
            chunk_overlap=info.chunk_overlap,
            record=False,
        )
    hits = store.by_doc(doc_id, with_embeddings=True)
    if [h.chunk_id for h in hits] != expected:
        raise InputError(f"the chunks of {doc_id!r} differ between embedders; re-ingest the document")
    return np.asarray([h.embedding for h in hits], dtype=np.float32)


def cached_tree(
    store: VectorStore,
    doc: DocumentVectors,
    *,
    temperature: float | None = None,
    extra_embedders: Sequence[str] = (),
    exact_max: int = 2000,
) -> tuple[ChowLiuTree, bool]:
    """The document's Chow-Liu tree, from the per-document cache when it was built from the same index."""
    tag = "+".join([store.space, *extra_embedders])
    shape = f"{re.sub(r'[^a-z0-9+.-]+', '-', tag.lower())}-t{temperature or 0}-x{exact_max}"
    key = f"chowliu-{shape}-i{index_identity(doc.info)}.json"
    path = cache_path(store.namespace, doc.info.doc_id, key)
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("n") == len(doc.chunk_ids):
            return ChowLiuTree.from_dict(data), True
    matrices = [doc.matrix] + [
        _extra_vectors(store.namespace, doc.info.doc_id, name, doc.chunk_ids) for name in extra_embedders
    ]
    tree = build_tree(matrices if len(matrices) > 1 else doc.matrix, temperature=temperature, exact_max=exact_max)
    write_atomic(path, json.dumps(tree.to_dict()))
    return tree, False


def query_similarity(store: VectorStore, doc: DocumentVectors, question: str) -> np.ndarray:
    """Cosine similarity of every chunk to the question."""
    q = np.asarray(store.embedder.embed_query(question), dtype=np.float32)
    norms = np.linalg.norm(doc.matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    norms[norms == 0] = 1.0
    return (doc.matrix @ q) / norms


def plan_orders(
    order: str,
    *,
    tree: ChowLiuTree,
    doc: DocumentVectors,
    query_sim: np.ndarray,
    root: str = "query",
    children: str = "weight",
    seed: int = 0,
    roots: int = 1,
    max_chunks: int = 0,
) -> list[list[int]]:
    """One chunk order per chain (several when multi-root voting), each cut to ``max_chunks``."""
    n = len(doc.chunk_ids)
    common: dict[str, Any] = {
        "n": n,
        "tree": tree,
        "query_sim": query_sim,
        "sections": doc.sections,
        "children": children,
        "seed": seed,
        "embeddings": doc.matrix,
    }
    if roots > 1 and order.startswith("chow-liu"):
        starts = multi_roots(tree, query_sim, n_roots=roots)
        orders = [order_chunks(order, root=int(r), **common) for r in starts]
    elif roots > 1 and order == "random":
        orders = [order_chunks(order, root=root, **{**common, "seed": seed + i}) for i in range(roots)]
    else:
        orders = [order_chunks(order, root=root, **common)]
    if max_chunks > 0:
        orders = [o[:max_chunks] for o in orders]
    return orders


SentenceLabel = Annotated[str, WithJsonSchema({"type": "string", "pattern": "^c[0-9]+[.][0-9]+$"})]
"""A sentence label such as ``c3.2``: the schema shown to the model asks for labels only (a grammar-constrained
endpoint can then write nothing else, and no sentence is copied out token by token); what comes back is still
read leniently by :func:`nodes.chain.passages.check_quotes`."""


class WorkerQuotes(BaseModel):
    """What one worker adds to the evidence: the sentences it quotes, and what is still missing."""

    quotes: list[SentenceLabel] = Field(
        default_factory=list,
        description="labels of the sentences that help, e.g. c3.2",
        json_schema_extra={"maxItems": 8},  # schema only: a longer list is cut, not refused
    )
    missing: str = Field(
        default="", description="what is still needed to answer the question", json_schema_extra={"maxLength": 300}
    )


def compose_evidence(previous: str, labels: Sequence[str], shown: dict[str, str], max_tokens: int) -> str:
    """The next evidence: earlier quotes and the new ones, one ``[label] sentence`` line each, in document order.

    A quote already present is not repeated; once the quotes fill ``max_tokens`` tokens, later
    ones are kept only while they fit, so the evidence stays bounded however long the chain is.
    """
    lines = {m.group(1): ln for ln in previous.splitlines() if (m := _QUOTE_LINE.match(ln))}
    used = sum(count_tokens(ln) for ln in lines.values())
    for label in labels:
        if label in lines or label not in shown:
            continue
        line = f"[{label}] {shown[label]}"
        cost = count_tokens(line)
        if lines and used + cost > max_tokens:
            continue
        lines[label] = line
        used += cost
    return "\n".join(lines[label] for label in sorted(lines, key=label_order))


@dataclass
class WorkerResult:
    """What one worker step gives the chain."""

    notes: str
    """The evidence passed on: quoted sentences behind their labels (unchanged when nothing was quoted)."""
    relevant: bool
    """Whether the worker quoted a sentence not yet in the evidence."""
    missing: str
    """What the worker says the question still needs ("" when nothing)."""
    complete: bool
    """The evidence holds quotes and the worker says nothing is missing."""
    chunk_tokens: int
    """Tokens of document text the worker read (what the reading budget counts)."""
    dropped: int = 0
    """Quotes that named no sentence the worker was shown."""


def on_topic(labels: Sequence[str], shown: dict[str, str], topics: Sequence[str], most: int) -> list[str]:
    """At most ``most`` of the quoted labels, those whose sentences share a content word with the question
    or with what is missing, the most overlapping first (a small model quotes unrelated sentences too)."""
    words = set().union(*(content_words(t) for t in topics if t))
    scored = [(len(content_words(shown[label]) & words), i, label) for i, label in enumerate(labels)]
    chosen = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[: max(most, 1)]
    return [label for _, _, label in sorted(chosen, key=lambda x: x[1])]


def closest(shown: dict[str, str], topics: Sequence[str], most: int = 2, least: int = 2) -> list[str]:
    """The ``most`` shown sentences that share the most content words (at least ``least``) with the question
    or the missing piece: what the worker is shown is quoted by its words too, not only by the model's choice."""
    words = set().union(*(content_words(t) for t in topics if t))
    scored = [(len(content_words(text) & words), i, label) for i, (label, text) in enumerate(shown.items())]
    best = sorted((x for x in scored if x[0] >= least), key=lambda x: (-x[0], x[1]))[:most]
    return [label for _, _, label in best]


def with_context(labels: Sequence[str], passages: Sequence[Passage]) -> list[str]:
    """The quoted labels, each preceded by the first sentence of its passage (which names what the
    passage is about, so a quote that says "it" or "he" keeps its subject)."""
    opening = {label: p.labels[0] for p in passages for label in p.labels}
    out: list[str] = []
    for label in labels:
        for one in (opening.get(label, label), label):
            if one not in out:
                out.append(one)
    return out


def worker_step(
    llm: LLM,
    *,
    question: str,
    notes: str,
    passages: Sequence[Passage],
    lang: str,
    quotes: int = 6,
    max_tokens: int = 160,
    max_evidence_tokens: int = 700,
    previous_missing: str = "",
) -> WorkerResult:
    """One worker: read a batch of passages with the evidence so far; quote what bears on the question."""
    shown = sentence_index(passages)
    system = prompts.render("chain/worker", lang, quotes=quotes)
    user = prompts.render(
        "chain/worker_user",
        lang,
        question=question,
        evidence=notes or "(none yet)",
        passages="\n\n".join(p.labelled() for p in passages),
    )
    reply = llm.structured(messages(system, user), WorkerQuotes, max_tokens=max_tokens)
    checked = check_quotes(reply.quotes, shown)
    missing = " ".join(reply.missing.split())
    if nothing_missing(missing):
        missing = ""
    topics = [question, missing, previous_missing]
    kept = on_topic([*checked.kept, *closest(shown, topics)], shown, topics, quotes)
    updated = compose_evidence(notes, with_context(kept, passages), shown, max_evidence_tokens)
    relevant = updated != notes
    has_quotes = bool(updated.strip())
    read = sum(count_tokens(p.text) for p in passages)
    return WorkerResult(updated, relevant, missing, has_quotes and not missing, read, checked.dropped)


def manager_answer(
    llm: LLM,
    *,
    question: str,
    chain_notes: Sequence[str],
    lang: str,
    max_tokens: int = 200,
) -> Answer:
    """The manager's answer from the quotes every chain gathered."""
    if len(chain_notes) == 1:
        body = "Quotes:\n" + (chain_notes[0] or "(the readers quoted nothing)")
        reconcile = ""
    else:
        body = "\n\n".join(f"Quotes of chain {i}:\n{n or '(nothing quoted)'}" for i, n in enumerate(chain_notes, 1))
        reconcile = (
            "Several chains read the document in different orders; reconcile their quotes: prefer what "
            "several chains quoted, and ignore quotes that contradict the others."
        )
    system = prompts.render("chain/manager", lang, reconcile=reconcile)
    user = prompts.render("chain/manager_user", lang, question=question, notes=body)
    return llm.structured(messages(system, user), Answer, max_tokens=max_tokens)


def read_and_answer(
    llm: LLM, *, question: str, chunks: Sequence[Hit], lang: str, max_tokens: int = 200, chunk_tokens: int = 1200
) -> Answer:
    """Single-call baseline: answer from the given chunks put in one prompt."""
    pieces = "\n\n".join(f"[{c.chunk_id}] {truncate_tokens(c.text, chunk_tokens)}" for c in chunks)
    system = prompts.render("chain/reader", lang)
    user = prompts.render("chain/reader_user", lang, question=question, pieces=pieces)
    return llm.structured(messages(system, user), Answer, max_tokens=max_tokens)


def valid_citations(answer: Answer, known: Sequence[str], notes: Sequence[str] = ()) -> list[str]:
    """Cited chunk ids that were read, from the evidence list and the explanation, in first-seen order.

    Sentence labels (``c3.2``) count for their chunk. An answer that cites nothing (and is not
    "unknown") is credited to every chunk its chains quoted.
    """
    allowed = set(known)
    found: list[str] = []
    for ref in [*answer.evidence, *_REF.findall(answer.explanation)]:
        cid = ref.strip().strip("[]").split(".")[0]
        if cid in allowed and cid not in found:
            found.append(cid)
    if not found and not is_unknown(answer.answer):
        for label in quoted_labels(notes):
            cid = label.split(".")[0]
            if cid in allowed and cid not in found:
                found.append(cid)
    return found


def quoted_labels(notes: Sequence[str]) -> list[str]:
    """Labels of every quote in the chains' evidence, first-seen order."""
    out: list[str] = []
    for text in notes:
        for line in text.splitlines():
            m = _QUOTE_LINE.match(line)
            if m and m.group(1) not in out:
                out.append(m.group(1))
    return out


def supporting_quotes(answer: Answer, notes: Sequence[str]) -> list[str]:
    """The quote lines (``[label] sentence``) the answer rests on: those it cites, else all of them."""
    lines = {m.group(1): ln for text in notes for ln in text.splitlines() if (m := _QUOTE_LINE.match(ln))}
    cited = [ref.strip().strip("[]") for ref in [*answer.evidence, *_REF.findall(answer.explanation)]]
    chosen = [lines[label] for label in dict.fromkeys(cited) if label in lines]
    if not chosen and not is_unknown(answer.answer):
        chosen = list(lines.values())
    return chosen


def is_unknown(answer: str) -> bool:
    """Whether an answer says it does not know."""
    return answer.strip().strip(".").lower() in {"unknown", "未知", ""}


def is_inferred(answer: str, quotes: Sequence[str]) -> bool:
    """Whether an answer is not stated in its quotes: some of its content words appear in none of them."""
    if is_unknown(answer):
        return False
    words = content_words(answer)
    if not words:
        return False
    stated = set().union(*(content_words(q) for q in quotes)) if quotes else set()
    return not words <= stated
