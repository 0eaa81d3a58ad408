"""The pieces of a turn's working memory: the details chosen for it, the pinned state and the history.

:func:`select_details` chooses the chunks a turn shows; :func:`detail_pieces`, :func:`pinned_piece`
and :func:`history_pieces` (per memory policy) turn what the session holds into cuttable
:class:`~nodes.offload.memory.Piece` objects for :func:`~nodes.offload.memory.build_memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import prompts
from nodes.collection.sources import Sources, chunk_sentences
from nodes.offload.memory import OFFLOADING, Piece
from stores.labels import QUOTE_LINE, chunk_of
from stores.text import truncate_tokens

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
        details = details_text(list(t.get("quotes", []))) if details_text else ""
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


def evidence_pieces(evidence: str, question: str) -> list[Piece]:
    """One piece per quote of the reading's evidence: ``[c3.2] sentence`` (in a collection ``[2:c3.2]``).

    The later quotes are cut first when the memory is over its budget (the reading gives them in document order).
    """
    pieces = []
    for rank, line in enumerate(evidence.splitlines()):
        match = QUOTE_LINE.match(line)
        if match:
            label = match.group(1)
            body = line[match.end() :]
            pieces.append(Piece("details", label, body, "detail", rank=-rank, head=f"[{label}] ", query=question))
    return pieces


def quoted_lines(sources: Sources, labels: Sequence[str]) -> str:
    """The quotes an earlier turn answered from, ``[c3.2] sentence`` lines looked up by label (for verbatim history).

    Sentences are numbered as the reading numbers them (:func:`~nodes.collection.sources.chunk_sentences`).
    """
    hits = {h.chunk_id: h for h in sources.chunks([chunk_of(label) for label in labels])}
    lines = []
    for label in labels:
        hit = hits.get(chunk_of(label))
        number = label.rpartition(".")[2]
        if hit is None or not number.isdigit():
            continue
        sentences = chunk_sentences(hit.text)
        if 0 < int(number) <= len(sentences):
            lines.append(f"[{label}] {' '.join(sentences[int(number) - 1].split())}")
    return "\n".join(lines)
