"""The working memory of one answering call: its pieces and their assembly within a token budget.

The memory policy (``POLICIES``) decides what the history holds; :func:`build_memory` renders the
sections in order (canvas, pinned state, history, details, recalled, then the question) and
:func:`fit_budget` cuts the least important pieces first when the prompt is over the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import prompts
from nodes.retrieval import focus_snippet
from stores.models import messages
from stores.text import count_tokens, truncate_tokens

POLICIES = ("full", "last_k", "offload", "offload_canvas")
OFFLOADING = ("offload", "offload_canvas")
SECTIONS = ("canvas", "pinned", "history", "details", "recalled")
MIN_SHRUNK_TOKENS = 40


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
        """The piece's text: head, body and, when shortened, the note."""
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
        """The system and user messages for the model."""
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


def _drop(pieces: list[Piece], cut: list[str], over: Callable[[], int], stage: str, keep: int = 0) -> None:
    """Drop the pieces of ``stage`` in cut order, all but the last ``keep``, while the prompt is over budget."""
    order = _cut_order(pieces, stage)
    for i in order[: max(0, len(order) - keep)]:
        if over() <= 0:
            return
        cut.append(f"{pieces[i].section}:{pieces[i].key} dropped")
        pieces[i] = replace(pieces[i], body="", head="", note="", stage="dropped")


def _shorten(pieces: list[Piece], cut: list[str], i: int, before: int, target: int) -> None:
    """Shorten piece ``i`` (``before`` tokens long) to ``target`` tokens when that is shorter, and record it."""
    if target < before:
        pieces[i] = pieces[i].shrink(target)
        cut.append(f"{pieces[i].section}:{pieces[i].key} shortened {before}->{count_tokens(pieces[i].body)} tokens")


def _shrink(pieces: list[Piece], cut: list[str], over: Callable[[], int], stage: str, share: float) -> None:
    """Shorten the pieces of ``stage`` in cut order to ``share`` of their length while the prompt is over budget."""
    for i in _cut_order(pieces, stage):
        if over() <= 0:
            return
        before = count_tokens(pieces[i].body)
        _shorten(pieces, cut, i, before, max(MIN_SHRUNK_TOKENS, int(before * share)))


def _squeeze(pieces: list[Piece], cut: list[str], over: Callable[[], int], stage: str) -> None:
    """Shorten the pieces of ``stage``, last cut first, by what the prompt is still over budget."""
    for i in reversed(_cut_order(pieces, stage)):
        excess = over()
        if excess <= 0:
            return
        before = count_tokens(pieces[i].body)
        _shorten(pieces, cut, i, before, max(MIN_SHRUNK_TOKENS // 2, before - excess - 8))


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

    steps: list[Callable[[], None]] = [
        lambda: _drop(pieces, cut, over, "old"),
        lambda: _shrink(pieces, cut, over, "detail", 0.5),
        lambda: _drop(pieces, cut, over, "detail", keep=1),
        lambda: _shrink(pieces, cut, over, "recalled", 0.5),
        lambda: _drop(pieces, cut, over, "recent"),
        lambda: _drop(pieces, cut, over, "recalled"),
        lambda: _squeeze(pieces, cut, over, "detail"),
        lambda: _squeeze(pieces, cut, over, "canvas"),
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
