"""Test-only model doubles: a model that ignores length instructions, openai's error for a cut-off reply, and a
chain worker that quotes the sentences holding a keyword."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from doubles.replies import shown_sentences, summarize_reply


def _cut_words(text: str, words: int) -> str:
    """``text`` cut to its first ``words`` words and ended as a sentence, keeping the citations of the words kept."""
    kept = re.sub(r"\s+", " ", text).strip().split(" ")[:words]
    cut = " ".join(kept)
    if not cut.endswith((".", "]")):
        cut = cut.rstrip(",;:") + "."  # a whole sentence still, as a model that writes short would end it
    if re.search(r"\[c\d+\]", cut):
        return cut
    first = re.findall(r"\[c\d+\]", text)[:1]
    return " ".join([cut, *first]).strip()


def fixed_length_reply(words: int = 20) -> Any:
    """A summarize reply function whose every written text (answers, drafts, summaries) has ``words`` words,
    whatever length the prompt asks for: the model that ignores length instructions."""

    def reply(messages: Sequence[BaseMessage]) -> str:
        text = summarize_reply(messages)
        system = str(messages[0].content)
        if '"questions"' in system or '"verdicts"' in system:
            return text
        if '"answer"' in system or '"draft"' in system:
            data = json.loads(text)
            key = "answer" if '"answer"' in system else "draft"
            if data[key] and data[key] != "not found":
                data[key] = _cut_words(data[key], words)
            return json.dumps(data)
        return _cut_words(text, words)

    return reply


def length_finish_error(partial: str = '{"verdicts": [') -> Exception:
    """openai's own error for a structured reply cut off at ``max_tokens`` (what a real endpoint raises)."""
    import openai
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate(
        {
            "id": "cut",
            "object": "chat.completion",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": partial}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 40, "total_tokens": 60},
        }
    )
    return openai.LengthFinishReasonError(completion=completion)


# --- a scripted chain worker: quotes the shown sentences that hold a keyword ---------------------
def quoting(rules: Sequence[tuple[str, str]], otherwise: str = "") -> Any:
    """A worker reply function: quote every shown sentence holding a rule's keyword, with that rule's
    ``missing``; when no keyword is shown, quote nothing and say ``otherwise`` is missing."""

    def reply(messages: Sequence[BaseMessage]) -> str:
        shown = shown_sentences(messages)
        for keyword, missing in rules:
            labels = [label for label, text in shown if keyword in text]
            if labels:
                return json.dumps({"quotes": labels, "missing": missing})
        return json.dumps({"quotes": [], "missing": otherwise})

    return reply
