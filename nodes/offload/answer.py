"""The answering call of a turn: its reply schemas, the call itself, its citations and the recall round.

With offloaded turns in the history the model may answer or ask to recall ids (``o3`` for an
offloaded turn, ``c7`` for a chunk); :func:`resolve_recall` loads them (unknown ids become a note to
the model) for one more answering call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

import prompts
from nodes.offload.memory import Memory, Piece
from stores.models import LLM, ModelOutputError, messages
from stores.offload import OffloadStore, is_offload_id
from stores.text import CITATION_TAG, count_tokens
from stores.usage import track_usage
from stores.vectorstore import VectorStore

_ID = re.compile(r"^\[?\s*([oc]\d{1,6}[a-z]?)\s*\]?$", re.IGNORECASE)


class AnswerReply(BaseModel):
    """The answering model's reply."""

    answer: str = Field(description="The answer, at most 3 short sentences, with [c3]-style citations.")
    citations: list[str] = Field(default_factory=list, max_length=8, description="Chunk ids used, such as c3.")


class RecallReply(AnswerReply):
    """The answering model's reply when offloaded turns can be recalled."""

    recall: list[str] = Field(
        default_factory=list,
        max_length=3,
        description="Ids (o2, c7) whose full text is needed before answering; empty when the memory suffices.",
    )


def citations_of(reply: AnswerReply, chunks: int) -> list[str]:
    """Chunk ids the answer cites (its list and its ``[c3]`` markers) that exist in the document."""
    found = [*reply.citations, *CITATION_TAG.findall(reply.answer)]
    out = []
    for raw in found:
        match = re.fullmatch(r"\[?c(\d+)\]?", str(raw).strip(), re.IGNORECASE)
        if match and int(match.group(1)) < chunks:
            out.append(f"c{int(match.group(1))}")
    return list(dict.fromkeys(out))


def ask(llm: LLM, memory: Memory, *, recall: bool, max_tokens: int, lang: str) -> tuple[AnswerReply, str]:
    """One answering call: schema-enforced JSON, or plain text when the JSON stays invalid.

    Returns the reply and ``"json"`` or ``"text"`` (how the answer was obtained); an empty
    plain-text answer is a ModelOutputError, never an answer.
    """
    schema: type[AnswerReply] = RecallReply if recall else AnswerReply
    try:
        return llm.structured(memory.messages(), schema, max_tokens=max_tokens), "json"
    except ModelOutputError:
        system = prompts.render("offload/answer_plain", lang)
        with track_usage() as spent:
            text = llm.text(messages(system, memory.user), max_tokens=max_tokens)
        if not text.strip():
            raise ModelOutputError(f"the {llm.role} model gave no answer, as JSON or as text", spent) from None
        return AnswerReply(answer=text.strip(), citations=[]), "text"


def normalise_ids(raw: Sequence[str]) -> list[str]:
    """Ids the model asked for, cleaned (``[O2]`` -> ``o2``), unique, in order; blanks dropped."""
    out: list[str] = []
    for item in raw:
        text = str(item).strip()
        if not text:
            continue
        match = _ID.match(text)
        out.append(match.group(1).lower() if match else text[:40])
    return list(dict.fromkeys(out))


def resolve_recall(
    ids: Sequence[str],
    *,
    offload_store: OffloadStore,
    session: str,
    chunk_store: VectorStore,
    doc_id: str,
    chunks: int,
    recall_tokens: int,
    lang: str,
) -> tuple[list[Piece], list[dict[str, Any]]]:
    """Load recalled ids as pieces; unknown ids become a note to the model. Returns pieces and a report."""
    offloaded = {i.id: i for i in offload_store.get(session, [i for i in ids if is_offload_id(i)])}
    chunk_ids = [i for i in ids if re.fullmatch(r"c\d+", i) and int(i[1:]) < chunks]
    hits = {h.chunk_id: h for h in chunk_store.get([f"{doc_id}:{c}" for c in chunk_ids])}
    known = [i.id for i in offload_store.list(session)]
    pieces: list[Piece] = []
    report: list[dict[str, Any]] = []
    for rank, rid in enumerate(ids):
        if rid in offloaded:
            text, source = offloaded[rid].text, "offload"
        elif rid in hits:
            text, source = hits[rid].text, "chunk"
        else:
            note = prompts.render("offload/recall_unknown", lang, id=rid, known=", ".join(known) or "-")
            pieces.append(Piece("recalled", rid, note, "fixed"))
            report.append({"id": rid, "found": False, "source": "", "tokens": 0})
            continue
        text = " ".join(text.split()) if source == "chunk" else text.strip()
        piece = Piece("recalled", rid, text, "recalled", rank=-rank, head=f"[{rid}] ")
        if count_tokens(text) > recall_tokens:
            piece = piece.shrink(recall_tokens)
        pieces.append(piece)
        report.append({"id": rid, "found": True, "source": source, "tokens": count_tokens(piece.body)})
    return pieces, report
