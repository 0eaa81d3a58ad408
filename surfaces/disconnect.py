"""A served request whose caller leaves before its answer stops its run's model calls (LangServe and Aegra).

The engines cancel a run's asyncio task when a streaming client disconnects (LangServe through
``sse_starlette``, Aegra's ``/runs/stream`` with ``on_disconnect: cancel``, its default), but the steps
already running on worker threads go on, and a request that is not streamed (``/invoke``, ``/batch``,
Aegra's ``/runs/wait``) is not cancelled at all. :func:`until_disconnect` watches the connection for
the whole request and, when the caller leaves before the response is complete, stops the request's
:class:`stores.usage.CallBudget`: no model call of the run starts after that, on any thread, and the
run ends at its next one (:class:`stores.usage.RunStopped`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stores.usage import CallBudget, max_model_calls, run_budget

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
