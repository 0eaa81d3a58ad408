"""A run's deadline (``LONGDOC_RUN_TIMEOUT``), held in a context variable that every model call reads."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar

from stores.errors import RunTimeout

DEFAULT_RUN_TIMEOUT = 1800.0
"""Seconds a whole run (a served request, a command-line run) may take by default."""


def run_timeout() -> float | None:
    """Seconds a run may take (``LONGDOC_RUN_TIMEOUT``, default 1800; 0 for no limit)."""
    raw = os.environ.get("LONGDOC_RUN_TIMEOUT", "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_RUN_TIMEOUT
    except ValueError:
        seconds = DEFAULT_RUN_TIMEOUT
    return seconds if seconds > 0 else None


def run_timeout_message(seconds: float) -> str:
    """What a run cut at its deadline says."""
    return f"the run did not finish within {seconds:g} s (LONGDOC_RUN_TIMEOUT)"


_deadline: ContextVar[tuple[float, float] | None] = ContextVar("longdoc_run_deadline", default=None)
"""The current run's deadline: (``time.monotonic()`` value, the limit in seconds it came from)."""


@contextlib.contextmanager
def run_deadline(seconds: float | None) -> Iterator[None]:
    """Give every model call made inside the block a deadline ``seconds`` from now.

    The deadline lives in a context variable, so it holds in any thread that runs in a copy of
    this context (LangGraph runs every node that way, the server every request): each model call
    waits at most until it (its connect and read timeouts are cut to the time left, a streamed
    reply is cut when the time is up), and none starts after it (:func:`check_deadline`). A
    deadline inside another keeps the earlier of the two. ``None`` or 0: no new deadline.
    """
    if not seconds or seconds <= 0:
        yield
        return
    end = time.monotonic() + seconds
    current = _deadline.get()
    token = _deadline.set(current if current is not None and current[0] <= end else (end, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def deadline_left() -> float | None:
    """Seconds left to the current run's deadline (negative once past), ``None`` without one."""
    current = _deadline.get()
    return None if current is None else current[0] - time.monotonic()


def check_deadline() -> float | None:
    """The seconds left to the current run's deadline, or :class:`RunTimeout` once it has passed."""
    current = _deadline.get()
    if current is None:
        return None
    left = current[0] - time.monotonic()
    if left <= 0:
        raise RunTimeout(run_timeout_message(current[1]))
    return left


class DeadlineReached(BaseException):
    """The run's deadline passed while a model request was being sent or read.

    A ``BaseException``: the OpenAI client's retry loop must not catch it and send the request
    again. :class:`stores.models.LLM` turns it into a :class:`RunTimeout`.
    """


def deadline_reached() -> DeadlineReached:
    """The DeadlineReached error for the current run, with the deadline check's message."""
    try:
        check_deadline()
    except RunTimeout as exc:
        return DeadlineReached(str(exc))
    return DeadlineReached("the run's deadline has passed")
