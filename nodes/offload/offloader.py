"""The offloader agent: a finished turn becomes a one-line conclusion and facts to pin.

:func:`compress_turn` writes the note (checked against the exchange, with the answer's first
sentence as the fallback); :func:`update_pinned` keeps the pinned state (goal, facts) small.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

import prompts
from nodes.offload.canvas import content_terms
from stores.models import LLM, ModelOutputError, messages
from stores.text import overlap, split_sentences, truncate_tokens


class OffloadNote(BaseModel):
    """The offloader's note on a finished turn."""

    conclusion: str = Field(description="One line of at most 25 words keeping the answer's facts.")
    facts: list[str] = Field(default_factory=list, max_length=3, description="Facts to pin, at most 15 words each.")
    goal: str = Field(default="", description="The user's overall goal in at most 12 words, or empty.")


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
) -> tuple[OffloadNote, str]:
    """The offloader's note on a finished turn; on invalid output, the answer's first sentence.

    The note is checked against the exchange: facts whose words are mostly absent from the
    question and answer are dropped, and an unsupported conclusion is replaced by the answer's first
    sentence. Returns the note and an error message (empty when the model's note was used).
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
        note = llm.structured(messages(system, user), OffloadNote, max_tokens=max_tokens)
    except ModelOutputError as exc:
        return OffloadNote(conclusion=first_sentence(answer)), str(exc)
    source = f"{question} {answer}"
    conclusion = note.conclusion.strip()
    if not conclusion or not supported(conclusion, source, 0.5):
        conclusion = first_sentence(answer)
    kept = [f for f in note.facts if supported(f, source)]
    return note.model_copy(update={"conclusion": conclusion, "facts": kept}), ""


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
