"""The one bound on a question, query or routing request, checked by every workflow at its door."""

from __future__ import annotations

from stores.errors import InputError

MAX_QUESTION_CHARS = 4000
"""Longest question, query or routing request any workflow accepts (characters)."""


def check_question(text: str, what: str = "question") -> str:
    """``text`` stripped, or InputError when it is empty or longer than :data:`MAX_QUESTION_CHARS`."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise InputError(f"the {what} is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return text.strip()
