"""A served request whose caller leaves before its answer stops its run's model calls, on every server.

The engines cancel a run's asyncio task when a streaming client disconnects (LangServe through
``sse_starlette``, Aegra's ``/runs/stream`` with ``on_disconnect: cancel``, its default), but the steps
already running on worker threads go on, and a request that is not streamed (``/invoke``, ``/batch``,
Aegra's ``/runs/wait``) is not cancelled at all. :func:`until_disconnect` watches the connection for
the whole request and, when the caller leaves before the response is complete, stops the request's
:class:`stores.usage.CallBudget`: no model call of the run starts after that, on any thread, and the
run ends at its next one (:class:`stores.usage.RunStopped`).

The MCP and A2A routes run each call as a run of the server's own API, over a loopback request of their own
(:mod:`deploy.mcp`). :class:`CallerWatch` watches their caller's connection, and :func:`while_caller_stays`
cancels that loopback request when the caller leaves: the server then sees the run's own client leave, and
stops it as above.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stores.usage import CallBudget, RunStopped, max_model_calls, run_budget

T = TypeVar("T")

LEFT = "the client disconnected before the answer: its run was stopped"
"""What a run stopped because its caller left says (in the server's log; the caller is gone)."""


async def until_disconnect(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, on_disconnect: Callable[[], None]
) -> None:
    """Pass the request to ``app``; call ``on_disconnect`` if the client leaves before the response is complete.

    ``receive`` must hand over the whole body in its first message (the guards read it first). One task
    waits on the connection from then on and answers the app's own later ``receive`` calls (a
    streaming response listening for the disconnect), so the connection has a single reader.
    """
    first = await receive()
    finished = False

    async def watch() -> Message:
        message = first
        while message["type"] != "http.disconnect":
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body"):
                return message  # handed the body again instead of waiting: no connection here to watch
        if not finished:
            on_disconnect()
        return message

    watcher = asyncio.ensure_future(watch())
    given = False

    async def app_receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return first
        return await asyncio.shield(watcher)

    async def app_send(message: Message) -> None:
        nonlocal finished
        if message["type"] == "http.response.body" and not message.get("more_body"):
            finished = True
        await send(message)

    try:
        await app(scope, app_receive, app_send)
    finally:
        finished = True
        watcher.cancel()


def stopper(budget: CallBudget) -> Callable[[], None]:
    """What to do when the caller of the request ``budget`` bounds leaves: stop its model calls."""
    return lambda: budget.stop(LEFT)


class DisconnectMiddleware:
    """LangServe: each POST gets its bound on model calls, stopped when its client leaves before the answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request inside its budget of ``LONGDOC_MAX_MODEL_CALLS``, watching its connection."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        with run_budget(max_model_calls()) as budget:
            await until_disconnect(self.app, scope, receive, send, stopper(budget))


def stops_on_disconnect(path: str, body: Any) -> bool:
    """Whether the run a request creates stops when its client leaves before the answer.

    A ``/runs/wait`` does, and a ``/runs/stream`` unless it asks ``on_disconnect: continue`` (with or without a
    thread). A background run (``POST /threads/{id}/runs``) goes on without its client.
    """
    kind = path.rstrip("/").rsplit("/", 1)[-1]
    if kind == "wait":
        return True
    on_disconnect = body.get("on_disconnect") if isinstance(body, dict) else None
    return kind == "stream" and str(on_disconnect or "cancel").lower() != "continue"


class Departure:
    """The caller of a request leaving before its answer, and what is to happen then."""

    def __init__(self) -> None:
        self.left = False
        self._then: list[Callable[[], object]] = []

    def leave(self) -> None:
        """The caller has left: do what was asked (:meth:`then`)."""
        self.left = True
        for action in self._then:
            action()

    def then(self, action: Callable[[], object]) -> None:
        """Call ``action`` when the caller leaves (at once if it has)."""
        if self.left:
            action()
        else:
            self._then.append(action)


_departure: contextvars.ContextVar[Departure | None] = contextvars.ContextVar("departure", default=None)
"""The current MCP or A2A request's caller (None outside one)."""

CANCELLED_ROUTES = ("/a2a/",)
"""Routes whose whole answer is cancelled when their caller leaves (an A2A turn, streamed or not)."""

TOLD_ROUTES = ("/mcp",)
"""Routes told that their caller left (:func:`while_caller_stays`): the MCP SDK answers each call on a task of its
own, which must end for the request to end."""


class CallerWatch:
    """The MCP and A2A routes: a POST's caller leaving before its answer stops the runs it started.

    The connection is watched for the whole request (:func:`until_disconnect`); when the caller leaves, an A2A
    request is cancelled, with the loopback request of its run, and an MCP call's loopback request is cancelled
    through :func:`while_caller_stays`. A guard in front has read and bounded the body (``receive`` hands it over
    whole).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Watch a POST to a watched route; pass every other request on as it is."""
        path = str(scope.get("path", "")) if scope["type"] == "http" else ""
        if scope["type"] != "http" or scope["method"] != "POST" or not path.startswith(CANCELLED_ROUTES + TOLD_ROUTES):
            await self.app(scope, receive, send)
            return
        departure = Departure()
        token = _departure.set(departure)
        try:
            with anyio.CancelScope() as cancel:
                if path.startswith(CANCELLED_ROUTES):
                    departure.then(cancel.cancel)
                await until_disconnect(self.app, scope, receive, send, departure.leave)
        finally:
            _departure.reset(token)


async def while_caller_stays(work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, cancelled when the caller of the current MCP or A2A request leaves (:class:`RunStopped` then).

    Cancelling it closes the loopback request it made, so the server stops that run's model calls.
    """
    departure = _departure.get()
    if departure is None:
        return await work()
    with anyio.CancelScope() as cancel:
        departure.then(cancel.cancel)
        return await work()
    raise RunStopped(LEFT)
