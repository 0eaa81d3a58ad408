"""The runs of ``langgraph dev``: each bounded in model calls, and stopped when the client waiting for it leaves.

``langgraph dev`` runs a graph on a worker task of its own, not in the request that created the run, so a bound
opened by the request would not reach it, and its ``/runs/wait`` and ``/runs/stream`` let a run go on when their
client leaves (``on_disconnect: continue``, its default). Here, as on LangServe and Aegra:

- every run executes inside a :class:`stores.usage.CallBudget` of ``LONGDOC_MAX_MODEL_CALLS`` (:func:`run_bounded`,
  which the graphs of ``langgraph.json`` open for each run: :mod:`deploy.dev_graphs`);
- :class:`RunWatch` watches the connection of a ``/runs/wait``, and of a ``/runs/stream`` unless it asks
  ``on_disconnect: continue`` (:func:`surfaces.disconnect.stops_on_disconnect`); when the client leaves before the
  answer, the budget of the run the request created (named by the response's ``Content-Location``) is stopped, so
  no model call of it starts after that, on any thread. A run stopped before it started is born stopped.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stores.cache import ProcessCache
from stores.usage import CallBudget, max_model_calls, run_budget
from surfaces.access import replay_body
from surfaces.disconnect import LEFT, stops_on_disconnect, until_disconnect

RUN_REQUEST = re.compile(r"^(?:/threads/[^/]+)?/runs/(?:wait|stream)/?$")
"""A request that creates a run and answers with it: its client waits for the answer."""

_running: ProcessCache[str, CallBudget] = ProcessCache("running dev runs", maxsize=4096)
"""The budgets of the runs executing in this process, by run id."""

_stopped: ProcessCache[str, str] = ProcessCache("stopped dev runs", maxsize=4096)
"""Why each run stopped by its client leaving was stopped, by run id (a run that has not started yet, or runs again
after a retry, starts stopped)."""


@contextlib.contextmanager
def run_bounded(run_id: str) -> Iterator[CallBudget]:
    """Open run ``run_id``'s budget of ``LONGDOC_MAX_MODEL_CALLS`` for the block.

    Every model call of the run takes from it (the worker threads of its steps included); :func:`stop_run` stops it.
    """
    with run_budget(max_model_calls()) as budget:
        reason = _stopped.get(run_id)
        if reason:
            budget.stop(reason)
        _running.put(run_id, budget)
        try:
            yield budget
        finally:
            if _running.get(run_id) is budget:
                _running.pop(run_id)


def stop_run(run_id: str, reason: str = LEFT) -> None:
    """Stop run ``run_id``'s model calls, now if it executes, else from its start."""
    _stopped.put(run_id, reason)
    budget = _running.get(run_id)
    if budget is not None:
        budget.stop(reason)


def created_run(message: Message) -> str:
    """The id of the run a response answers for (its ``Content-Location``, ``.../runs/{id}``), else ''."""
    for key, value in message.get("headers") or []:
        if key.lower() == b"content-location":
            path = value.decode("latin-1").rstrip("/")
            return path.rsplit("/", 1)[-1] if "/runs/" in path else ""
    return ""


class RunWatch:
    """A run request whose client leaves before the answer stops the run it created (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Watch ``/runs/wait`` and ``/runs/stream``, with a thread or without; pass the rest on as it is.

        The guard in front has read the body and checked it is JSON: ``receive`` hands it over whole.
        """
        if scope["type"] != "http" or scope["method"] != "POST" or not RUN_REQUEST.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        first = await receive()
        raw = first.get("body", b"")
        receive = replay_body(raw, receive)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:  # the server answers what it cannot read
            body = {}
        if not stops_on_disconnect(scope["path"], body):
            await self.app(scope, receive, send)
            return
        run: list[str] = []
        left: list[bool] = []

        def leave() -> None:
            left.append(True)
            for run_id in run:
                stop_run(run_id)

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and created_run(message):
                run.append(created_run(message))
                if left:
                    stop_run(run[0])
            await send(message)

        await until_disconnect(self.app, scope, receive, noting, leave)
