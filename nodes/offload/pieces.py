"""The pieces of a turn's working memory: the details chosen for it, the pinned state and the history.

:func:`select_details` chooses the chunks a turn shows; :func:`detail_pieces`, :func:`pinned_piece`
and :func:`history_pieces` (per memory policy) turn what the session holds into cuttable
:class:`~nodes.offload.memory.Piece` objects for :func:`~nodes.offload.memory.build_memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import prompts
from nodes.collection.sources import Sources
from nodes.offload.memory import OFFLOADING, Piece
from nodes.retrieval import focus_snippet
from stores.text import count_tokens, truncate_tokens
from stores.vectorstore import VectorStore

QUESTION_NOTE_TOKENS = 25


def pinned_piece(pinned: dict[str, Any], lang: str) -> Piece | None:
    """The pinned state (goal, confirmed facts), or None when empty."""
    goal = str(pinned.get("goal", "")).strip()
    facts = [str(f) for f in pinned.get("facts", []) if str(f).strip()]
    if not goal and not facts:
        return None
    none = "（无）" if lang == "zh" else "(none)"
    text = prompts.render(
        "offload/mem_pinned", lang, goal=goal or none, facts="\n".join(f"- {f}" for f in facts) or none
    )
    return Piece("pinned", "pinned", text, "fixed")


def question_note(question: str) -> str:
    """A question cut to a short note."""
    return truncate_tokens(" ".join(question.split()), QUESTION_NOTE_TOKENS)


def note_line(record: dict[str, Any]) -> str:
    """``[o3] question → conclusion``: how a compressed turn reads in the history."""
    return f"[{record['offload_id']}] {question_note(record['question'])} → {record.get('conclusion', '')}".strip()


def history_pieces(
    turns: list[dict[str, Any]],
    policy: str,
    keep_turns: int,
    lang: str,
    *,
    details_text: Callable[[list[str]], str] | None = None,
    relevant: Sequence[str] = (),
) -> list[Piece]:
    """History pieces of ``policy``; ``relevant`` are offload ids of older turns to show as notes."""
    if not turns:
        return []
    recent = turns[-keep_turns:] if keep_turns > 0 else []
    older = turns[: len(turns) - len(recent)]
    pieces: list[Piece] = []
    if policy in OFFLOADING:
        wanted = set(relevant)
        shown = [t for t in older if t.get("offload_id") in wanted]
        hidden = [t["offload_id"] for t in older if t.get("offload_id") not in wanted and t.get("offload_id")]
        if hidden:
            ids = ", ".join(hidden)
            pieces.append(Piece("history", "older", prompts.render("offload/older", lang, ids=ids), "old", rank=-1))
        for t in shown:
            pieces.append(Piece("history", t["offload_id"], note_line(t), "old", rank=int(t["turn"])))
        for t in recent:
            pieces.append(Piece("history", t["offload_id"], note_line(t), "recent", rank=int(t["turn"])))
        return pieces
    first_recent = len(turns) - len(recent)
    none = "（无）" if lang == "zh" else "(none)"
    for index, t in enumerate(turns):
        if policy != "full" and index < first_recent:
            continue
        details = details_text(list(t.get("details", []))) if details_text else ""
        text = prompts.render(
            "offload/turn_full",
            lang,
            turn=t["turn"],
            details=details or none,
            question=t["question"],
            answer=t.get("answer", ""),
        )
        stage = "recent" if index >= first_recent else "old"
        pieces.append(Piece("history", f"turn {t['turn']}", text, stage, rank=int(t["turn"])))
    return pieces


def detail_pieces(
    store: VectorStore,
    doc_id: str,
    refs: list[dict[str, Any]],
    question: str,
    detail_tokens: int,
    lang: str,
    *,
    recallable: bool,
    doc_ids: Sequence[str] = (),
    tags: Mapping[str, int] | None = None,
) -> list[Piece]:
    """One piece per retrieved chunk, most relevant first: ``[c3] sentences nearest the question``.

    In a collection ``doc_ids`` the piece starts ``[2:c3]``.

    A chunk longer than ``detail_tokens`` is shortened; its full text stays in the store under its
    chunk id, and with ``recallable`` the piece says how to recall it.
    """
    hits = {h.chunk_id: h for h in Sources(store, doc_ids or [doc_id], tags).chunks([r["chunk_id"] for r in refs])}
    pieces = []
    for rank, ref in enumerate(refs):
        hit = hits.get(ref["chunk_id"])
        if hit is None:
            continue
        text = " ".join(hit.text.split())
        note = prompts.render("offload/shortened", lang, id=ref["chunk_id"]) if recallable else ""
        piece = Piece(
            "details",
            ref["chunk_id"],
            text,
            "detail",
            rank=-rank,
            head=f"[{ref['chunk_id']}] ",
            note=note,
            query=question,
        )
        if count_tokens(text) > detail_tokens:
            piece = piece.shrink(detail_tokens)
        pieces.append(piece)
    return pieces


def full_details(
    store: VectorStore,
    doc_id: str,
    chunk_ids: list[str],
    question: str,
    detail_tokens: int,
    doc_ids: Sequence[str] = (),
    tags: Mapping[str, int] | None = None,
) -> str:
    """The details an earlier turn saw, as they were shown (for verbatim history)."""
    hits = {h.chunk_id: h for h in Sources(store, doc_ids or [doc_id], tags).chunks(chunk_ids)}
    lines = []
    for cid in chunk_ids:
        if cid in hits:
            text = " ".join(hits[cid].text.split())
            if count_tokens(text) > detail_tokens:
                text = focus_snippet(text, question, detail_tokens)
            lines.append(f"[{cid}] {text}")
    return "\n".join(lines)


def select_details(
    store: VectorStore,
    doc_id: str,
    question: str,
    *,
    k: int,
    min_score: float,
    min_details: int,
    canvas_refs: Sequence[dict[str, Any]] = (),
    doc_ids: Sequence[str] = (),
    tags: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Chunk refs ``{chunk_id, score, via}`` for this turn, at most ``k``.

    Candidates are ranked by hybrid search (vector + BM25); those whose cosine similarity reaches
    ``min_score`` are relevant. The most relevant chunk comes first, then the chunks of canvas nodes
    the question touches (``canvas_refs``), then the other relevant chunks; when fewer than
    ``min_details`` are chosen, the best remaining candidates fill up. ``doc_ids``: search every document of
    the collection (refs ``2:c3``).
    """
    pool = max(3 * k, 8)
    sources = Sources(store, doc_ids or [doc_id], tags)
    fused = sources.search(question, k=pool)
    cosine = {h.chunk_id: h.score for h in sources.dense(question, pool)}
    relevant: list[dict[str, Any]] = []
    below: list[dict[str, Any]] = []
    for hit in fused:
        score = round(cosine.get(hit.chunk_id, 0.0), 4)
        (relevant if score >= min_score else below).append({"chunk_id": hit.chunk_id, "score": score, "via": "search"})
    chosen: list[dict[str, Any]] = []

    def add(ref: dict[str, Any]) -> None:
        if len(chosen) < k and all(c["chunk_id"] != ref["chunk_id"] for c in chosen):
            chosen.append(dict(ref))

    for ref in [*relevant[:1], *canvas_refs, *relevant[1:]]:
        add(ref)
    for ref in below:
        if len(chosen) >= min_details:
            break
        add({**ref, "via": "best"})
    return chosen
