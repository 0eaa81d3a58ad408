"""Token accounting: a usage dict ``{role: {"input": n, "output": m, "calls": 1, "cached": 0}}`` per step.

:class:`stores.models.LLM` records each request's counts with :func:`record_usage`; a graph node
gathers what its calls spent with :func:`track_usage` and puts it in its state update, which graph
states merge with :func:`merge_usage`.

A request's model calls are also bounded: :func:`call_budget` opens the budget of one request
(``LONGDOC_MAX_MODEL_CALLS``), :class:`stores.models.LLM` takes one call from it before each request it
sends (:func:`spend_call`), and a workflow whose plan needs more calls than are left refuses up front
(:func:`check_calls`).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Sequence

from langchain_core.messages import BaseMessage

from stores.errors import RunTimeout, TooLarge
from stores.settings import get_settings
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


class CallsSpent(TooLarge):
    """A request that needs, or has made, more model calls than ``LONGDOC_MAX_MODEL_CALLS``: HTTP 413, exit 2."""


class RunStopped(RunTimeout):
    """The request's run was stopped (its caller left): no model call starts after it."""


class CallBudget:
    """The model calls one request may still make; shared by every thread of its run.

    :meth:`stop` ends it: a request whose caller left makes no more calls, whatever thread its run is on
    (the event loop can cancel a run's task, not the worker threads of its steps).
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.made = 0
        self.stopped = ""
        self._lock = threading.Lock()

    def left(self) -> int | None:
        """Calls the request may still make (None: no bound)."""
        if self.stopped:
            return 0
        return None if self.limit is None else max(0, self.limit - self.made)

    def stop(self, reason: str) -> None:
        """Refuse every call from now on with :class:`RunStopped` saying ``reason``."""
        with self._lock:
            self.stopped = reason

    def spend(self) -> None:
        """Take one call, or :class:`CallsSpent` when none is left (checked and taken under one lock)."""
        with self._lock:
            if self.stopped:
                raise RunStopped(self.stopped)
            if self.limit is not None and self.made >= self.limit:
                raise CallsSpent(
                    f"the request reached its bound of {self.limit} model calls (LONGDOC_MAX_MODEL_CALLS); "
                    "ask about fewer documents, or raise the bound"
                )
            self.made += 1


_budgets: contextvars.ContextVar[tuple[CallBudget, ...]] = contextvars.ContextVar("call_budgets", default=())
"""The open :func:`call_budget` budgets of the current context, outermost first."""


def max_model_calls() -> int | None:
    """The model calls one request may make (``LONGDOC_MAX_MODEL_CALLS``, default 200; 0: no bound)."""
    return get_settings().max_model_calls or None


@contextlib.contextmanager
def call_budget(limit: int | None = None) -> Iterator[CallBudget | None]:
    """Bound the model calls made inside the block (this context and copies of it: a run's node threads).

    ``limit`` defaults to :func:`max_model_calls`; 0 (or no bound set) opens nothing. Budgets nest
    as the usage recorders do: a call is taken from every open one.
    """
    limit = max_model_calls() if limit is None else limit
    if not limit:
        yield None
        return
    with run_budget(limit) as budget:
        yield budget


@contextlib.contextmanager
def run_budget(limit: int | None) -> Iterator[CallBudget]:
    """Open a :class:`CallBudget` of ``limit`` calls (None: unbounded, but it can still be stopped)."""
    budget = CallBudget(limit)
    token = _budgets.set((*_budgets.get(), budget))
    try:
        yield budget
    finally:
        _budgets.reset(token)


def spend_call() -> None:
    """Take one model call from every open budget (:class:`CallsSpent`, before sending, when one is spent)."""
    open_budgets = _budgets.get()
    for budget in open_budgets:
        if budget.left() == 0:
            budget.spend()  # raises, naming the bound or the stop, before any budget is charged
    for budget in open_budgets:
        budget.spend()


def calls_left() -> int | None:
    """Model calls the current request may still make: its open budgets', else the setting's (None: no bound)."""
    bounds = [left for left in (budget.left() for budget in _budgets.get()) if left is not None]
    return min(bounds) if bounds else (None if _budgets.get() else max_model_calls())


def check_calls(needed: int, what: str, advice: str = "name fewer documents") -> None:
    """Refuse, before its first model call, work that needs more model calls than the request has left.

    ``what`` says what the calls are for (e.g. ``"map-reduce over 2,400 chunks"``), ``advice`` what to do instead.
    """
    left = calls_left()
    if left is not None and needed > left:
        bound = max_model_calls()
        raise CallsSpent(
            f"{what} needs at least {needed:,} model calls, over the bound of {bound or left:,} a request may make "
            f"(LONGDOC_MAX_MODEL_CALLS; {left:,} left); {advice}"
        )
