"""Token accounting: a usage dict ``{role: {"input": n, "output": m, "calls": 1, "cached": 0}}`` per step.

:class:`stores.models.LLM` records each request's counts with :func:`record_usage`; a graph node
gathers what its calls spent with :func:`track_usage` and puts it in its state update, which graph
states merge with :func:`merge_usage`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Sequence

from langchain_core.messages import BaseMessage

from stores.text import count_tokens

Usage = dict[str, dict[str, int]]

_recorders: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar("usage_recorders", default=())
"""The open :func:`track_usage` dicts of the current context, outermost first."""
_record_lock = threading.Lock()
"""Held while adding to the recorders: an outer recorder is shared by the threads of a graph's parallel steps."""


@contextlib.contextmanager
def track_usage() -> Iterator[Usage]:
    """Gather the usage of every model request made inside the block (this context and copies of it).

    Recorders nest: each request is added to every open one, so a node's and an outer caller's both
    count it. LangGraph runs each step with a copy of the caller's context, so a recorder opened
    inside a node receives that step's requests only. Not ``langchain_core``'s
    ``UsageMetadataCallbackHandler`` (``get_usage_metadata_callback``), even with role tags: it sums per
    model name, has no count of replies answered from :mod:`stores.llm_cache`, and counts nothing for a
    reply whose endpoint sent no token counts (:func:`usage_of` counts those here).
    """
    spent: Usage = {}
    token = _recorders.set((*_recorders.get(), spent))
    try:
        yield spent
    finally:
        _recorders.reset(token)


def record_usage(used: Usage) -> None:
    """Add one request's counts to every open :func:`track_usage` recorder."""
    with _record_lock:
        for spent in _recorders.get():
            merged = merge_usage(spent, used)
            spent.clear()
            spent.update(merged)


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
