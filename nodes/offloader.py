"""The offloader agent and the working memory of a session turn.

Working memory of one answering call, in order: system prompt, canvas (the document's map),
pinned state (goal, confirmed facts), history, details retrieved for this turn, anything recalled,
and the question. How history looks depends on the memory policy:

* ``full``: every earlier turn verbatim (the details it saw, the question, the answer);
* ``last_k``: the last ``keep_turns`` turns verbatim, older ones forgotten;
* ``offload`` / ``offload_canvas``: one-line conclusions of the last ``keep_turns`` turns, the
  older turns most relevant to the question (retrieved from the offload store), and the ids of
  the rest; the raw text of each turn lives in the offload store and can be recalled by id.
  ``offload_canvas`` adds the canvas.

:func:`build_memory` enforces a token budget per call: when the assembled prompt is over it, the
least important parts are cut first (older turns, then details shortened and dropped, then
recalled texts shortened, then recent turns), and every cut is recorded.

After each turn the offloader (:func:`compress_turn`) turns the finished exchange into a one-line
conclusion and the facts to pin; :func:`update_pinned` keeps the pinned state small.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, Field

import prompts
from nodes.canvas import content_terms
from nodes.retrieval import focus_snippet, hybrid_search
from stores.models import LLM, ModelOutputError, Usage, messages
from stores.offload import OffloadStore, is_offload_id
from stores.text import CITATION_TAG, count_tokens, overlap, split_sentences, truncate_tokens
from stores.vectorstore import VectorStore

POLICIES = ("full", "last_k", "offload", "offload_canvas")
OFFLOADING = ("offload", "offload_canvas")
SECTIONS = ("canvas", "pinned", "history", "details", "recalled")
MIN_SHRUNK_TOKENS = 40
QUESTION_NOTE_TOKENS = 25
_ID = re.compile(r"^\[?\s*([oc]\d{1,6}[a-z]?)\s*\]?$", re.IGNORECASE)


# --- schemas ------------------------------------------------------------------------------------
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


class OffloadNote(BaseModel):
    """The offloader's note on a finished turn."""

    conclusion: str = Field(description="One line of at most 25 words keeping the answer's facts.")
    facts: list[str] = Field(default_factory=list, max_length=3, description="Facts to pin, at most 15 words each.")
    goal: str = Field(default="", description="The user's overall goal in at most 12 words, or empty.")


# --- pieces of the working memory ---------------------------------------------------------------
@dataclass
class Piece:
    """One cuttable part of the working memory."""

    section: str
    """canvas, pinned, history, details or recalled."""
    key: str
    """What the cut report calls it: o3, c12, turn 2, canvas, older, ..."""
    body: str
    """The text (what gets shortened)."""
    stage: str
    """How the budget treats it: fixed, old, recent, detail, recalled, canvas."""
    rank: int = 0
    """Within a stage, lower ranks are cut first."""
    head: str = ""
    """Text before the body (e.g. ``[c3] ``), never shortened."""
    note: str = ""
    """Text added after the body once it is shortened (e.g. how to recall the full text)."""
    query: str = ""
    """Question the body is shortened towards."""
    shortened: bool = False
    source: str = ""
    """The body before any shortening (shortening always starts from it)."""

    @property
    def text(self) -> str:
        tail = f" {self.note}" if self.shortened and self.note else ""
        return f"{self.head}{self.body}{tail}"

    def shrink(self, tokens: int) -> Piece:
        """The same piece with its body cut to about ``tokens`` (the sentences nearest the question)."""
        source = self.source or self.body
        body = focus_snippet(source, self.query, tokens) if self.query else truncate_tokens(source, tokens)
        return replace(self, body=body, shortened=True, source=source)


@dataclass
class Memory:
    """An assembled working memory."""

    system: str
    user: str
    tokens: int
    """Estimated tokens of system + user."""
    parts: dict[str, int]
    """Estimated tokens per section (plus system and question)."""
    cut: list[str] = field(default_factory=list)
    """What the budget removed or shortened."""
    pieces: list[Piece] = field(default_factory=list)

    def messages(self) -> list[Any]:
        return messages(self.system, self.user)


def _render_section(section: str, pieces: list[Piece], lang: str, history_style: str) -> str:
    texts = [p.text for p in pieces if p.section == section and p.text.strip()]
    if not texts:
        return ""
    if section == "canvas":
        return prompts.render("offload/mem_canvas", lang, canvas="\n".join(texts))
    if section == "pinned":
        return "\n".join(texts)
    if section == "history":
        name = "offload/mem_history" if history_style == "notes" else "offload/mem_history_full"
        return prompts.render(name, lang, turns="\n".join(texts) if history_style == "notes" else "\n\n".join(texts))
    if section == "details":
        return prompts.render("offload/mem_details", lang, details="\n".join(texts))
    return prompts.render("offload/mem_recalled", lang, recalled="\n".join(texts))


def render_user(pieces: list[Piece], question: str, lang: str, history_style: str = "notes") -> str:
    """The user message: every non-empty section in order, then the question."""
    blocks = [_render_section(s, pieces, lang, history_style) for s in SECTIONS]
    blocks.append(prompts.render("offload/mem_question", lang, question=question))
    return "\n\n".join(b for b in blocks if b)


def _total(system: str, pieces: list[Piece], question: str, lang: str, style: str) -> int:
    return count_tokens(system) + count_tokens(render_user(pieces, question, lang, style))


def _cut_order(pieces: list[Piece], stage: str) -> list[int]:
    return sorted((i for i, p in enumerate(pieces) if p.stage == stage), key=lambda i: (pieces[i].rank, i))


def fit_budget(
    system: str, pieces: list[Piece], question: str, lang: str, budget: int, style: str = "notes"
) -> tuple[list[Piece], list[str]]:
    """Cut ``pieces`` until the prompt fits ``budget`` estimated tokens; returns them and what was cut.

    Order: older turns dropped (oldest first); details shortened to half, then dropped except the
    most relevant; recalled texts shortened; recent turns dropped (oldest first); recalled texts
    dropped; the last detail shortened to what is left; the canvas shortened. If the prompt is still
    over budget (a huge question or system prompt), the overrun is recorded.
    """
    pieces = list(pieces)
    cut: list[str] = []
    if budget <= 0:
        return pieces, cut

    def over() -> int:
        return _total(system, pieces, question, lang, style) - budget

    def drop(stage: str, keep: int = 0) -> None:
        order = _cut_order(pieces, stage)
        for i in order[: max(0, len(order) - keep)]:
            if over() <= 0:
                return
            cut.append(f"{pieces[i].section}:{pieces[i].key} dropped")
            pieces[i] = replace(pieces[i], body="", head="", note="", stage="dropped")

    def shrink(stage: str, share: float) -> None:
        for i in _cut_order(pieces, stage):
            if over() <= 0:
                return
            before = count_tokens(pieces[i].body)
            target = max(MIN_SHRUNK_TOKENS, int(before * share))
            if target < before:
                pieces[i] = pieces[i].shrink(target)
                cut.append(
                    f"{pieces[i].section}:{pieces[i].key} shortened {before}->{count_tokens(pieces[i].body)} tokens"
                )

    def squeeze(stage: str) -> None:
        for i in reversed(_cut_order(pieces, stage)):
            excess = over()
            if excess <= 0:
                return
            before = count_tokens(pieces[i].body)
            target = max(MIN_SHRUNK_TOKENS // 2, before - excess - 8)
            if target < before:
                pieces[i] = pieces[i].shrink(target)
                cut.append(
                    f"{pieces[i].section}:{pieces[i].key} shortened {before}->{count_tokens(pieces[i].body)} tokens"
                )

    steps: list[Callable[[], None]] = [
        lambda: drop("old"),
        lambda: shrink("detail", 0.5),
        lambda: drop("detail", keep=1),
        lambda: shrink("recalled", 0.5),
        lambda: drop("recent"),
        lambda: drop("recalled"),
        lambda: squeeze("detail"),
        lambda: squeeze("canvas"),
    ]
    for step in steps:
        if over() <= 0:
            break
        step()
    excess = over()
    if excess > 0:
        cut.append(f"over budget by {excess} tokens")
    return [p for p in pieces if p.stage != "dropped"], cut


def build_memory(
    system: str,
    pieces: list[Piece],
    question: str,
    lang: str,
    budget: int,
    history_style: str = "notes",
) -> Memory:
    """Assemble the working memory within ``budget`` estimated tokens (0 = no budget)."""
    kept, cut = fit_budget(system, pieces, question, lang, budget, history_style)
    user = render_user(kept, question, lang, history_style)
    parts = {"system": count_tokens(system)}
    for section in SECTIONS:
        text = _render_section(section, kept, lang, history_style)
        if text:
            parts[section] = count_tokens(text)
    parts["question"] = count_tokens(prompts.render("offload/mem_question", lang, question=question))
    return Memory(
        system=system, user=user, tokens=count_tokens(system) + count_tokens(user), parts=parts, cut=cut, pieces=kept
    )


# --- building the pieces ------------------------------------------------------------------------
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
) -> list[Piece]:
    """One piece per retrieved chunk: ``[c3] sentences nearest the question``, most relevant first.

    A chunk longer than ``detail_tokens`` is shortened; its full text stays in the store under its
    chunk id, and with ``recallable`` the piece says how to recall it.
    """
    hits = {h.chunk_id: h for h in store.get([f"{doc_id}:{r['chunk_id']}" for r in refs])}
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


def full_details(store: VectorStore, doc_id: str, chunk_ids: list[str], question: str, detail_tokens: int) -> str:
    """The details an earlier turn saw, as they were shown (for verbatim history)."""
    hits = {h.chunk_id: h for h in store.get([f"{doc_id}:{cid}" for cid in chunk_ids])}
    lines = []
    for cid in chunk_ids:
        if cid in hits:
            text = " ".join(hits[cid].text.split())
            if count_tokens(text) > detail_tokens:
                text = focus_snippet(text, question, detail_tokens)
            lines.append(f"[{cid}] {text}")
    return "\n".join(lines)


# --- details ------------------------------------------------------------------------------------
def select_details(
    store: VectorStore,
    doc_id: str,
    question: str,
    *,
    k: int,
    min_score: float,
    min_details: int,
    canvas_refs: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Chunk refs ``{chunk_id, score, via}`` for this turn, at most ``k``.

    Candidates are ranked by hybrid search (vector + BM25); those whose cosine similarity reaches
    ``min_score`` are relevant. The most relevant chunk comes first, then the chunks of canvas nodes
    the question touches (``canvas_refs``), then the other relevant chunks; when fewer than
    ``min_details`` are chosen, the best remaining candidates fill up.
    """
    pool = max(3 * k, 8)
    fused = hybrid_search(store, doc_id, question, k=pool)
    cosine = {h.chunk_id: h.score for h in store.search(question, k=pool, doc_id=doc_id)}
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


# --- recall -------------------------------------------------------------------------------------
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


# --- answering ----------------------------------------------------------------------------------
def citations_of(reply: AnswerReply, chunks: int) -> list[str]:
    """Chunk ids the answer cites (its list and its ``[c3]`` markers) that exist in the document."""
    found = [*reply.citations, *CITATION_TAG.findall(reply.answer)]
    out = []
    for raw in found:
        match = re.fullmatch(r"\[?c(\d+)\]?", str(raw).strip(), re.IGNORECASE)
        if match and int(match.group(1)) < chunks:
            out.append(f"c{int(match.group(1))}")
    return list(dict.fromkeys(out))


def ask(llm: LLM, memory: Memory, *, recall: bool, max_tokens: int, lang: str) -> tuple[AnswerReply, Usage, str]:
    """One answering call: schema-enforced JSON, or plain text when the JSON stays invalid.

    Returns the reply, the usage and ``"json"`` or ``"text"`` (how the answer was obtained); an empty
    plain-text answer is a ModelOutputError, never an answer.
    """
    schema: type[AnswerReply] = RecallReply if recall else AnswerReply
    try:
        reply, usage = llm.structured(memory.messages(), schema, max_tokens=max_tokens)
        return reply, usage, "json"
    except ModelOutputError:
        system = prompts.render("offload/answer_plain", lang)
        text, usage = llm.text(messages(system, memory.user), max_tokens=max_tokens)
        if not text.strip():
            raise ModelOutputError(f"the {llm.role} model gave no answer, as JSON or as text", usage) from None
        return AnswerReply(answer=text.strip(), citations=[]), usage, "text"


# --- the offloader agent ------------------------------------------------------------------------
def first_sentence(text: str, tokens: int = 30) -> str:
    """The first sentence of ``text``, cut to about ``tokens``."""
    sentences = split_sentences(" ".join(text.split()))
    return truncate_tokens(sentences[0] if sentences else text.strip(), tokens)


def _stems(text: str) -> set[str]:
    return {t[:5] for t in content_terms(text)}


def supported(claim: str, source: str, min_share: float = 0.6) -> bool:
    """True when most content words of ``claim`` (compared by their first 5 letters) occur in ``source``."""
    words = _stems(claim)
    return bool(words) and overlap(words, _stems(source)) >= min_share


def compress_turn(
    llm: LLM,
    *,
    question: str,
    answer: str,
    pinned: dict[str, Any],
    lang: str,
    max_tokens: int,
    answer_tokens: int = 200,
) -> tuple[OffloadNote, Usage, str]:
    """The offloader's note on a finished turn; on invalid output, the answer's first sentence.

    The note is checked against the exchange: facts whose words are mostly absent from the
    question and answer are dropped, and an unsupported conclusion is replaced by the answer's first
    sentence. Returns the note, the usage and an error message (empty when the model's note was used).
    """
    none = "（无）" if lang == "zh" else "(none)"
    facts = "\n".join(f"- {f}" for f in pinned.get("facts", [])) or none
    system = prompts.render("offload/offloader", lang)
    user = prompts.render(
        "offload/offloader_user",
        lang,
        goal=pinned.get("goal") or none,
        facts=facts,
        question=question,
        answer=truncate_tokens(answer, answer_tokens),
    )
    try:
        note, usage = llm.structured(messages(system, user), OffloadNote, max_tokens=max_tokens)
    except ModelOutputError as exc:
        return OffloadNote(conclusion=first_sentence(answer)), {}, str(exc)
    source = f"{question} {answer}"
    conclusion = note.conclusion.strip()
    if not conclusion or not supported(conclusion, source, 0.5):
        conclusion = first_sentence(answer)
    facts = [f for f in note.facts if supported(f, source)]
    return note.model_copy(update={"conclusion": conclusion, "facts": facts}), usage, ""


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def update_pinned(
    pinned: dict[str, Any], note: OffloadNote, *, max_facts: int, fact_tokens: int = 25, goal_tokens: int = 20
) -> dict[str, Any]:
    """Pinned state after a turn: the goal kept once set, new facts added (no repeats), the newest ``max_facts``."""
    goal = str(pinned.get("goal", "")).strip() or truncate_tokens(note.goal.strip(), goal_tokens)
    facts = [str(f) for f in pinned.get("facts", [])]
    seen = {_norm(f) for f in facts}
    for fact in note.facts:
        fact = truncate_tokens(" ".join(fact.split()), fact_tokens)
        if fact and _norm(fact) not in seen:
            facts.append(fact)
            seen.add(_norm(fact))
    return {"goal": goal, "facts": facts[-max_facts:] if max_facts > 0 else []}
