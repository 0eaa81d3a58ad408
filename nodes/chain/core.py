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
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

import prompts
from nodes.chain.ordering.orders import order_chunks
from nodes.chain.ordering.traverse import multi_roots
from nodes.chain.ordering.tree import ChowLiuTree, build_tree
from nodes.chain.reading import nothing_missing
from nodes.ingest import index_document
from stores.documents import DocumentInfo, cache_path, document_text, get_document, index_identity, write_atomic
from stores.loaders import load_text
from stores.models import LLM, messages
from stores.settings import InputError
from stores.text import CITATION_TAG, count_tokens, truncate_tokens
from stores.vectorstore import Hit, VectorStore, get_store

_TAGS = re.compile(r"(\s*\[c\d+\])+$")  # chunk tags a worker copied from the notes


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


class WorkerNote(BaseModel):
    """What one worker adds to the communication unit."""

    facts: list[str] = Field(default_factory=list, description="facts from the piece that help answer the question")
    missing: str = Field(default="", description="what is still needed to answer the question")


def compose_notes(previous: str, chunk_id: str, note: WorkerNote, max_words: int) -> str:
    """The next communication unit: earlier facts, this worker's new facts tagged ``[chunk_id]``, what is missing.

    Facts already present are not repeated; once the facts fill ``max_words`` words, later facts
    are kept only while they fit, so the unit stays bounded however long the chain is.
    """
    lines = [ln for ln in previous.splitlines() if ln.startswith("- ")]
    seen = {ln.rsplit(" [", 1)[0][2:].strip().lower() for ln in lines}
    used = sum(len(ln.split()) for ln in lines)
    for fact in note.facts:
        fact = _TAGS.sub("", " ".join(fact.split())).strip()
        if not fact or fact.lower() in seen:
            continue
        cost = len(fact.split()) + 1
        if used + cost > max_words and lines:
            continue
        lines.append(f"- {fact} [{chunk_id}]")
        seen.add(fact.lower())
        used += cost
    missing = " ".join(note.missing.split())
    return "\n".join(lines + ([] if nothing_missing(missing) else [f"Missing: {missing}"]))


@dataclass
class WorkerResult:
    """What one worker step gives the chain."""

    notes: str
    """The communication unit passed on (unchanged when the chunk added nothing)."""
    relevant: bool
    """Whether the chunk added a fact."""
    missing: str
    """What the worker says the question still needs ("" when nothing)."""
    complete: bool
    """The notes hold facts and the worker says nothing is missing."""
    chunk_tokens: int
    """Tokens of chunk text the worker read (what the reading budget counts)."""


def worker_step(
    llm: LLM,
    *,
    question: str,
    notes: str,
    chunk: Hit,
    lang: str,
    words: int = 50,
    max_tokens: int = 160,
    chunk_tokens: int = 1200,
    max_note_words: int = 200,
) -> WorkerResult:
    """One worker: read a chunk with the notes so far and return the new notes and what is missing."""
    text = truncate_tokens(chunk.text, chunk_tokens)
    system = prompts.render("chain/worker", lang, words=words)
    user = prompts.render(
        "chain/worker_user", lang, question=question, notes=notes or "(none yet)", chunk_id=chunk.chunk_id, chunk=text
    )
    note = llm.structured(messages(system, user), WorkerNote, max_tokens=max_tokens)
    updated = compose_notes(notes, chunk.chunk_id, note, max_note_words)
    relevant = any(f"[{chunk.chunk_id}]" in ln for ln in updated.splitlines())
    missing = " ".join(note.missing.split())
    if nothing_missing(missing):
        missing = ""
    final = updated if relevant else notes
    has_facts = any(ln.startswith("- ") for ln in final.splitlines())
    return WorkerResult(final, relevant, missing, has_facts and not missing, count_tokens(text))


def manager_answer(
    llm: LLM,
    *,
    question: str,
    chain_notes: Sequence[str],
    lang: str,
    max_tokens: int = 200,
) -> Answer:
    """The manager's answer from the facts in the last notes of every chain.

    The workers' "Missing:" lines are left out: the small model reads them as "the answer is not
    there" even when a later fact supplies it.
    """
    chain_notes = ["\n".join(ln for ln in n.splitlines() if not ln.startswith("Missing:")) for n in chain_notes]
    if len(chain_notes) == 1:
        body = "Worker notes:\n" + (chain_notes[0] or "(the workers found nothing relevant)")
        reconcile = ""
    else:
        body = "\n\n".join(
            f"Notes of chain {i}:\n{n or '(nothing relevant found)'}" for i, n in enumerate(chain_notes, 1)
        )
        reconcile = (
            "Several chains read the document in different orders; reconcile their notes: prefer facts "
            "that several chains found or that carry evidence ids, and ignore unsupported claims."
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
    """Cited chunk ids that exist, from the evidence list and the explanation, in first-seen order."""
    allowed = set(known)
    found: list[str] = []
    for cid in [*answer.evidence, *CITATION_TAG.findall(answer.explanation)]:
        cid = cid.strip().strip("[]")
        if cid in allowed and cid not in found:
            found.append(cid)
    if not found and answer.answer.strip().lower() != "unknown":
        for text in notes:
            for cid in CITATION_TAG.findall(text):
                if cid in allowed and cid not in found:
                    found.append(cid)
    return found
