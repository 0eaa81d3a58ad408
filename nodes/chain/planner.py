"""The planner: which passages each chain reads next, and when reading stops.

Before every worker the planner chooses the next passages (best-first along the tree, scored by
the question and by what the notes say is still missing; or the next chunk of a fixed order the
orderer planned, :mod:`nodes.chain.orderer`) or ends the chain: when the notes answer the question
(``complete``), when the next chunk would exceed the reading budget (``budget``), or when nothing
above the relevance floor is left (``end``). See :mod:`nodes.chain.reading` for the scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
from langgraph.runtime import Runtime

from nodes.chain.context import ChainContext
from nodes.chain.orderer import fresh_chain
from nodes.chain.passages import next_hop, quoted_sentences
from nodes.chain.pool import Reading, collection_tags, grown, pool_documents, run_reading, shortlist, tree_edges
from nodes.chain.reading import LEAST_BATCH, ReadingPolicy, chunk_bonus, next_batch, next_in_plan
from nodes.chain.state import ChainState
from stores.errors import InputError
from stores.vectorstore import get_store


def _choose(state: ChainState, ctx: ChainContext, chain: int, chain_state: dict[str, Any], reading: Reading) -> Choice:
    """The next batch of passages of one chain, or why it stops."""
    ids = state["chunk_ids"]
    order = state.get("order") or []
    read = order[chain] if chain < len(order) else []
    if ctx.early_stop and not ctx.read_all and read and chain_state["streak"] > ctx.confirm:
        return Choice([], "complete")
    if ctx.max_chunks and len(read) >= ctx.max_chunks:
        return Choice([], "budget")
    index = {cid: i for i, cid in enumerate(ids)}
    floor = None if ctx.read_all else ctx.floor
    passages = reading.passages
    if ctx.order == "best-first":
        return _best_first(state, ctx, chain, chain_state, reading, [index[c] for c in read], floor)
    rel = reading.relevance(state, chain_state["missing"], passages=False)
    nxt, chain_state["pos"], passed = next_in_plan(
        [index[c] for c in state["plan"][chain]], chain_state["pos"], rel, floor
    )
    skipped = [ids[i] for i in passed]
    if nxt is None:
        return Choice([], "end", skipped)
    batch = [i for i in passages.of_chunk(nxt) if i not in set(chain_state["taken"])]
    cost = sum(passages.tokens[i] for i in batch)
    if ctx.budget and not ctx.read_all and read and chain_state["spent"] + cost > ctx.budget:
        return Choice([], "budget", skipped)
    return Choice(batch, None, skipped)


def _best_first(
    state: ChainState,
    ctx: ChainContext,
    chain: int,
    chain_state: dict[str, Any],
    reading: Reading,
    read: list[int],
    floor: float | None,
) -> Choice:
    """Best-first reading: the most relevant passages of the whole document.

    The tree favours the chunks next to those read; the budget is extended once while a worker names a missing
    piece.
    """
    passages = reading.passages
    rel = reading.relevance(state, sought(state, ctx, chain_state["missing"], chain_state["current"]), passages=True)
    policy = ReadingPolicy(ctx.tree_weight, ctx.jump_penalty, floor)
    scores = rel + chunk_bonus(reading.tree, read, policy)[passages.chunks]
    plan = state["plan"][chain]
    if not read and plan:  # multi-root voting: this chain starts in its own root's chunk
        start = state["chunk_ids"].index(plan[0])
        scores = np.where(passages.chunks == start, scores + 10.0, scores)
    room = ctx.batch_tokens
    limit = ctx.budget + chain_state["extended"] if ctx.budget and not ctx.read_all else 0
    reason = "budget" if not chain_state["extended"] else "hop-budget"
    if limit:
        left = limit - chain_state["spent"]
        if left < room and chain_state["missing"] and not chain_state["extended"] and ctx.hop_budget:
            chain_state["extended"] = ctx.hop_budget
            left += ctx.hop_budget
            reason = "hop-budget"
        if read and left < ctx.batch_tokens * LEAST_BATCH:
            return Choice([], reason, [])
        room = min(room, left)
    batch = next_batch(scores, passages.tokens, chain_state["taken"], room, floor, at_least_one=not read)
    if ctx.max_chunks:
        batch = _within_chunks(batch, passages.chunks, read, ctx.max_chunks)
    if batch:
        return Choice(batch, None, [])
    untaken = [i for i in range(len(passages.passages)) if i not in set(chain_state["taken"])]
    above = [i for i in untaken if floor is None or scores[i] >= floor]
    if not above:
        return Choice([], "end", _unread_chunks(state, read, passages.chunks))
    return Choice([], reason if limit else "end", [])


def _within_chunks(batch: list[int], chunks: np.ndarray, read: list[int], most: int) -> list[int]:
    """The passages of ``batch`` (best first) whose chunks keep the chunks read at ``most``."""
    seen = set(read)
    kept = []
    for i in batch:
        chunk = int(chunks[i])
        if chunk not in seen and len(seen) >= most:
            continue
        seen.add(chunk)
        kept.append(i)
    return kept


def _unread_chunks(state: ChainState, read: list[int], chunks: np.ndarray) -> list[str]:
    """Chunks none of whose passages were read (passed over when a chain ends for lack of anything relevant)."""
    ids = state["chunk_ids"]
    return [ids[i] for i in range(len(ids)) if i not in set(read)]


@dataclass
class Choice:
    """The planner's choice for one chain: the passages to read next, or why the chain stops."""

    batch: list[int]
    reason: str | None
    skipped: list[str] = field(default_factory=list)


def reading_for(store: Any, state: ChainState, ctx: ChainContext) -> Reading:
    """What a run reads: the :class:`~nodes.chain.pool.Reading` of the chunks of its ``pool``."""
    return run_reading(store, state["pool"], ctx, state["collection"], state.get("tags"))


def sought(state: ChainState, ctx: ChainContext, missing: str, evidence: str) -> str:
    """What the next passages are chosen for besides the question: the missing piece a worker named.

    With bridges on (:attr:`ChainContext.bridges`), the words the best quote names beyond the question are added
    to it: "the director of the film shot in Leland" becomes "... maximum overdrive" once a quote says the film
    "Maximum Overdrive" was shot there.
    """
    if not missing or not ctx.bridges_on(state):
        return missing
    hop = next_hop(state["question"], quoted_sentences(evidence))
    return f"{missing} {hop.query}" if hop is not None and hop.query else missing


def _grown(store: Any, state: ChainState, ctx: ChainContext) -> dict[str, Any]:
    """A shortlist grown for the missing piece the last worker named (once per piece).

    The chunks most relevant to it join the shortlist, at its end. Empty when the run reads every chunk or nothing
    is new.
    """
    missing = state.get("missing", "")
    if not state.get("shortlisted") or not missing or missing in state.get("expanded", []):
        return {}
    query = sought(state, ctx, missing, state.get("current", ""))
    more = shortlist(store, state["collection"], query, ctx.shortlist, state.get("indexes") or None)
    pool = grown(state["pool"], more)
    update: dict[str, Any] = {"expanded": [*state.get("expanded", []), missing]}
    if pool != state["pool"]:
        tags = collection_tags(state.get("tags") or {}, pool)
        reading = run_reading(store, pool, ctx, state["collection"], tags)
        documents = pool_documents(store.namespace, pool, tags)
        update.update(
            pool=pool, chunk_ids=reading.doc.chunk_ids, documents=documents, tags=tags, tree=tree_edges(reading)
        )
    return update


def planner(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Choose the next passages of the current chain, or end it (and start the next chain, or hand over)."""
    ctx = runtime.context or ChainContext()
    store = get_store(state["namespace"], ctx.embedder)
    growth = _grown(store, state, ctx)
    state = cast(ChainState, {**state, **growth})
    reading = reading_for(store, state, ctx)
    if reading.doc.chunk_ids != state["chunk_ids"]:
        raise InputError("the chunks of a document of the run changed during the run; ask again")
    chain = state["chain"]
    chain_state: dict[str, Any] = {k: state.get(k, v) for k, v in fresh_chain().items()}
    notes, stops = list(state.get("notes", [])), list(state.get("stops", []))
    skipped = list(state.get("skipped", []))
    read = set(state.get("read", []))
    update: dict[str, Any] = dict(growth)
    while chain < len(state["plan"]):
        choice = _choose(state, ctx, chain, chain_state, reading)
        skipped += [c for c in choice.skipped if c not in skipped and c not in read]
        if choice.batch:
            update.update({"chain": chain, **chain_state, "batch": choice.batch, "skipped": skipped})
            return update
        notes.append(chain_state["current"])
        stops.append(choice.reason or "end")
        runtime.stream_writer(
            {"stage": "reading", "message": _stop_message(choice.reason or "end", state, chain, skipped)}
        )
        chain += 1
        chain_state = fresh_chain()
        update = {**growth, "notes": notes, "stops": stops}
    return {**update, "chain": chain, **chain_state, "batch": [], "skipped": skipped, "stopped": _overall(stops)}


def _overall(stops: list[str]) -> str:
    """One stop reason for the run: budget if any chain ran out of it, else complete if any was, else end."""
    for reason in ("budget", "hop-budget", "complete", "end"):
        if reason in stops:
            return reason
    return "end"


def _stop_message(reason: str, state: ChainState, chain: int, skipped: list[str]) -> str:
    order = state.get("order") or []
    read = len(order[chain]) if chain < len(order) else 0
    what = {
        "complete": "nothing is missing",
        "budget": "reading budget reached",
        "hop-budget": "reading budget and its extension for a missing piece reached",
        "end": "nothing left",
    }
    prefix = f"chain {chain + 1}: " if len(state["plan"]) > 1 else ""
    return (
        f"{prefix}stopped ({reason}: {what[reason]}) after reading {read} of {len(state['chunk_ids'])} chunks, "
        f"{len(skipped)} skipped"
    )


def next_step(state: ChainState) -> Literal["worker", "manager"]:
    """Passages were chosen, or hand over to the manager."""
    return "worker" if state.get("batch") else "manager"
