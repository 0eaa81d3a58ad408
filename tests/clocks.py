"""Time counted instead of measured: a fake clock for run deadlines, and a record of what the code waited for.

A test that bounds how long something takes by reading the wall clock fails on a busy machine. These bound
what the code under test asked to wait for instead (each HTTP request's timeouts as it was sent, after a run's
deadline cut them, and each back-off sleep of the model client and the graph), which load does not change.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

WAITING = ("openai", "langgraph", "langchain_core", "langchain_openai", "stores", "nodes", "graphs", "surfaces")
"""Packages whose sleeps are counted: the model client's and the graph's retries, the product's own waits."""
CLOCKED = ("connect", "read")
"""The timeouts of a request that bound how long it waits (``write`` and ``pool`` do not on loopback)."""


class FakeClock:
    """A monotonic clock that moves only when the test moves it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def fake_deadline_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Run deadlines (``run_deadline``, ``deadline_left``, ``check_deadline``) read a fake clock from now on."""
    from stores import deadlines

    clock = FakeClock()
    monkeypatch.setattr(deadlines, "time", clock)
    return clock


@dataclass
class Waits:
    """The waits asked for so far: each request's timeouts (seconds; none is infinite) and each sleep."""

    timeouts: list[dict[str, float]] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)

    def most(self) -> float:
        """The longest those waits could take: every request's connect and read timeouts, and every sleep."""
        return sum(t["connect"] + t["read"] for t in self.timeouts) + sum(self.sleeps)

    def clear(self) -> None:
        self.timeouts.clear()
        self.sleeps.clear()


def record_waits(monkeypatch: pytest.MonkeyPatch, clock: FakeClock | None = None) -> Waits:
    """Record every request sent through ``httpx``'s transport and every sleep of :data:`WAITING`, from now on.

    Those sleeps are recorded instead of slept (a back-off of 2 s costs the test nothing); others sleep as asked.

    ``clock`` (the run deadlines' fake clock) moves on by each sleep and by the timeout of each request that
    times out before its reply begins, so a deadline passes exactly when the waits asked for reach it.
    """
    import httpx

    waits = Waits()
    lock = threading.Lock()
    send = httpx.HTTPTransport.handle_request
    sleep = time.sleep

    def sending(transport: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        given = request.extensions.get("timeout") or {}
        timeouts = {name: float("inf") if given.get(name) is None else float(given[name]) for name in CLOCKED}
        with lock:
            waits.timeouts.append(timeouts)
        try:
            return send(transport, request)
        except httpx.TimeoutException as exc:
            if clock is not None:
                clock.advance(timeouts["connect" if isinstance(exc, httpx.ConnectTimeout) else "read"])
            raise

    def sleeping(seconds: float) -> None:
        if str(sys._getframe(1).f_globals.get("__name__", "")).split(".")[0] not in WAITING:
            sleep(seconds)
            return
        with lock:
            waits.sleeps.append(float(seconds))
        if clock is not None:
            clock.advance(seconds)
        sleep(0)  # recorded, not slept: the back-off is the figure under test, not the time it takes

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", sending)
    monkeypatch.setattr(time, "sleep", sleeping)
    return waits
