"""The single-call baselines the benchmarks set against the chain: one reader call over the top-k chunks.

:func:`top_k` picks the chunks most similar to the question that fit a token budget; :func:`read_and_answer`
answers from chunks put in one prompt (the top-k ones, or a whole short document).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import prompts
from nodes.chain.manager import Answer
from nodes.chain.orderer import document_vectors, query_similarity
from stores.models import LLM, messages
from stores.text import count_tokens, truncate_tokens
from stores.vectorstore import Hit, VectorStore


def top_k(store: VectorStore, doc_id: str, question: str, budget: int, chunk_tokens: int | None = None) -> list[Hit]:
    """The chunks most similar to ``question``, best first, while their text fits ``budget`` tokens.

    At least one chunk is returned; each chunk is counted at most ``chunk_tokens`` tokens long when given (what
    the reader is shown).
    """
    doc = document_vectors(store, doc_id)
    hits = store.by_doc(doc_id)
    ranked = np.argsort(-query_similarity(store, doc, question), kind="stable").tolist()
    chosen: list[Hit] = []
    used = 0
    for i in ranked:
        cost = count_tokens(hits[i].text if chunk_tokens is None else truncate_tokens(hits[i].text, chunk_tokens))
        if chosen and used + cost > budget:
            break
        chosen.append(hits[i])
        used += cost
    return chosen


def read_and_answer(
    llm: LLM, *, question: str, chunks: Sequence[Hit], lang: str, max_tokens: int = 200, chunk_tokens: int = 1200
) -> Answer:
    """Single-call baseline: answer from the given chunks put in one prompt."""
    pieces = "\n\n".join(f"[{c.chunk_id}] {truncate_tokens(c.text, chunk_tokens)}" for c in chunks)
    system = prompts.render("chain/reader", lang)
    user = prompts.render("chain/reader_user", lang, question=question, pieces=pieces)
    return llm.structured(messages(system, user), Answer, max_tokens=max_tokens)
