"""The worker: reads the passages the planner chose and passes the quotes on.

Each worker reads a batch of passages, the question and the evidence so far (the communication
unit: quoted sentences behind their labels, :mod:`nodes.chain.passages`) and answers with the
labels of the sentences that bear on the question and what is still missing; the code copies the
sentences verbatim into the evidence. A worker whose passages hold nothing relevant passes the
evidence on unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, WithJsonSchema, create_model

import prompts
from nodes.chain.context import ChainContext
from nodes.chain.passages import Passage, bridging, check_quotes, quoted_sentences, sentence_index
from nodes.chain.planner import reading_for
from nodes.chain.reading import nothing_missing
from nodes.chain.state import ChainState
from stores.errors import InputError
from stores.labels import QUOTE_LINE, SCHEMA_SENTENCE, SCHEMA_TAGGED_SENTENCE, chunk_of, label_position, label_tag
from stores.models import LLM, llm_for, messages
from stores.text import content_words, count_tokens
from stores.usage import track_usage
from stores.vectorstore import get_store


def worker(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Read the chosen passages and pass the quotes on."""
    ctx = runtime.context or ChainContext()
    chain, batch = state["chain"], state["batch"]
    reading = reading_for(get_store(state["namespace"], ctx.embedder), state, ctx)
    if reading.doc.chunk_ids != state["chunk_ids"] or max(batch) >= len(reading.passages.passages):
        raise InputError(f"the chunks of {state['doc_id']!r} changed during the run; ask again")
    passages = [reading.passages.passages[i] for i in sorted(batch)]  # shown in document order
    with track_usage() as usage:
        result = worker_step(
            llm_for("worker", ctx),
            question=state["question"],
            notes=state.get("current", ""),
            passages=passages,
            lang=state.get("language", "en"),
            quotes=ctx.quotes,
            max_tokens=ctx.worker_max_tokens,
            max_evidence_tokens=ctx.evidence_tokens,
            previous_missing=state.get("missing", ""),
            system_prompt=ctx.worker_prompt,
            bridges=ctx.bridges_on(state),
        )
    touched = list(dict.fromkeys(reading.passages.passages[i].chunk_id for i in batch))  # best passage first
    order = [list(o) for o in state.get("order") or []]
    while len(order) <= chain:
        order.append([])
    order[chain] += [c for c in touched if c not in order[chain]]
    read = list(state.get("read", []))
    read += [c for c in touched if c not in read]
    skipped = [c for c in state.get("skipped", []) if c not in touched]
    quoted = {chunk_of(m.group(1)) for ln in result.notes.splitlines() if (m := QUOTE_LINE.match(ln))}
    runtime.stream_writer(
        {
            "stage": "reading",
            "done": len(read),
            "total": len(state["chunk_ids"]),
            "chunk": ", ".join(touched),
            "relevant": result.relevant,
            "postfix": f"read {len(read)}, skipped {len(skipped)}",
        }
    )
    return {
        "order": order,
        "read": read,
        "skipped": skipped,
        "current": result.notes,
        "missing": result.missing if result.relevant or not state.get("missing") else state["missing"],
        "streak": _streak(state.get("streak", 0), result),
        "spent": state.get("spent", 0) + result.chunk_tokens,
        "taken": [*state.get("taken", []), *batch],
        "passages": [*state.get("passages", []), *(p.span for p in passages)],
        "dropped": state.get("dropped", 0) + result.dropped,
        "usage": usage,
        "relevant": [c for c in touched if c in quoted and result.relevant],
    }


def _streak(streak: int, result: Any) -> int:
    """Informative workers in a row that found the notes complete (a chunk that adds nothing does not count)."""
    if not result.relevant:
        return streak
    return streak + 1 if result.complete else 0


class WorkerQuotes(BaseModel):
    """What one worker adds to the evidence: the sentences it quotes, and what is still missing."""

    quotes: list[str] = Field(
        default_factory=list,
        description="labels of the sentences that help, e.g. c3.2",
        json_schema_extra={"maxItems": 8},  # schema only: a longer list is cut, not refused
    )
    missing: str = Field(
        default="", description="what is still needed to answer the question", json_schema_extra={"maxLength": 300}
    )


def _quotes_schema(name: str, doc: str, pattern: str, example: str) -> type[WorkerQuotes]:
    """The worker's reply schema for labels of one form (``pattern``, as in ``example``).

    The schema shown to the model asks for labels only (a grammar-constrained endpoint can then write nothing
    else, and no sentence is copied out token by token); what comes back is still read leniently by
    :func:`nodes.chain.passages.check_quotes`.
    """
    label = Annotated[str, WithJsonSchema({"type": "string", "pattern": pattern})]
    quotes: Any = Field(
        default_factory=list,
        description=f"labels of the sentences that help, e.g. {example}",
        json_schema_extra={"maxItems": 8},
    )
    return create_model(name, __base__=WorkerQuotes, __doc__=doc, quotes=(list[label], quotes))


PLAIN_QUOTES = _quotes_schema("WorkerQuotes", WorkerQuotes.__doc__ or "", SCHEMA_SENTENCE, "c3.2")
"""Quotes of one document's sentences (``c3.2``)."""
TAGGED_QUOTES = _quotes_schema(
    "TaggedQuotes",
    "A worker's quotes in a collection run: labels that name the document too.",
    SCHEMA_TAGGED_SENTENCE,
    "2:c3.2",
)
"""Quotes of a collection's sentences, whose labels name the document too (``2:c3.2``)."""


def compose_evidence(previous: str, labels: Sequence[str], shown: dict[str, str], max_tokens: int) -> str:
    """The next evidence: earlier quotes and the new ones, one ``[label] sentence`` line each, in document order.

    A quote already present is not repeated; once the quotes fill ``max_tokens`` tokens, later
    ones are kept only while they fit, so the evidence stays bounded however long the chain is.
    """
    lines = {m.group(1): ln for ln in previous.splitlines() if (m := QUOTE_LINE.match(ln))}
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
    return "\n".join(lines[label] for label in sorted(lines, key=label_position))


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
    """At most ``most`` of the quoted labels, those relevant to the question or to what is missing.

    A label is kept when its sentences share a content word with the question or with what is missing, the most
    overlapping first (a small model quotes unrelated sentences too).
    """
    words = set().union(*(content_words(t) for t in topics if t))
    scored = [(len(content_words(shown[label]) & words), i, label) for i, label in enumerate(labels)]
    chosen = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[: max(most, 1)]
    return [label for _, _, label in sorted(chosen, key=lambda x: x[1])]


def closest(shown: dict[str, str], topics: Sequence[str], most: int = 2, least: int = 2) -> list[str]:
    """The ``most`` shown sentences that share the most content words with the question or the missing piece.

    Each shares at least ``least`` of them: what the worker is shown is quoted by its words too, not only by the
    model's choice.
    """
    words = set().union(*(content_words(t) for t in topics if t))
    scored = [(len(content_words(text) & words), i, label) for i, (label, text) in enumerate(shown.items())]
    best = sorted((x for x in scored if x[0] >= least), key=lambda x: (-x[0], x[1]))[:most]
    return [label for _, _, label in best]


def with_context(labels: Sequence[str], passages: Sequence[Passage]) -> list[str]:
    """The quoted labels, each preceded by the first sentence of its passage.

    That sentence names what the passage is about, so a quote that says "it" or "he" keeps its subject.
    """
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
    system_prompt: str | None = None,
    bridges: bool = False,
) -> WorkerResult:
    """One worker: read a batch of passages with the evidence so far; quote what bears on the question.

    ``system_prompt`` is the context's ``worker_prompt`` (None: the template file in ``lang``); the reply's
    schema asks for labels of the form shown (in a collection they name the document, ``2:c3.2``); ``bridges``: the
    sentences that join the evidence to what the question still lacks are quoted too (:func:`bridging`).
    """
    shown = sentence_index(passages)
    system = prompts.render("chain/worker", lang, template=system_prompt, quotes=quotes)
    user = prompts.render(
        "chain/worker_user",
        lang,
        question=question,
        evidence=notes or "(none yet)",
        passages="\n\n".join(p.labelled() for p in passages),
    )
    schema = TAGGED_QUOTES if passages and label_tag(passages[0].chunk_id) is not None else PLAIN_QUOTES
    reply = llm.structured(messages(system, user), schema, max_tokens=max_tokens)
    checked = check_quotes(reply.quotes, shown)
    missing = " ".join(reply.missing.split())
    if nothing_missing(missing):
        missing = ""
    topics = [question, missing, previous_missing]
    kept = on_topic([*checked.kept, *closest(shown, topics)], shown, topics, quotes)
    if bridges:
        evidence = quoted_sentences(notes) | {k: shown[k] for k in kept}
        kept += [b for b in bridging(shown, evidence, question) if b not in kept]
    updated = compose_evidence(notes, with_context(kept, passages), shown, max_evidence_tokens)
    relevant = updated != notes
    has_quotes = bool(updated.strip())
    read = sum(count_tokens(p.text) for p in passages)
    return WorkerResult(updated, relevant, missing, has_quotes and not missing, read, checked.dropped)
