"""Token accounting: a usage dict ``{role: {"input": n, "output": m, "calls": 1, "cached": 0}}`` per step.

Graph states merge them with :func:`merge_usage`.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from stores.text import count_tokens

Usage = dict[str, dict[str, int]]


def merge_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: add token counts per role."""
    out: Usage = {role: dict(v) for role, v in (left or {}).items()}
    for role, counts in (right or {}).items():
        mine = out.setdefault(role, {})
        for key, value in counts.items():
            mine[key] = mine.get(key, 0) + int(value)
    return out


def relabel_usage(usage: Usage, label: str) -> Usage:
    """The same counts gathered under one label (e.g. the graph step that spent them)."""
    out: Usage = {}
    for counts in usage.values():
        out = merge_usage(out, {label: counts})
    return out


def usage_totals(usage: Usage) -> dict[str, int]:
    """Sum of input/output tokens and calls over every role."""
    total = {"input": 0, "output": 0, "calls": 0, "cached": 0}
    for counts in usage.values():
        for key in total:
            total[key] += int(counts.get(key, 0))
    return total


def usage_of(message: BaseMessage, messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """Input and output tokens of a reply: the endpoint's counts, else counted here."""
    meta = getattr(message, "usage_metadata", None) or {}
    if meta.get("input_tokens") is not None:
        return int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
    prompt = sum(count_tokens(str(m.content)) for m in messages)
    return prompt, count_tokens(str(message.content))
