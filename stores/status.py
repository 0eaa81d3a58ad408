"""Status lines a run shows while a long step has nothing else to show (the model reading a long prompt).

:func:`report_status` sends one ``{"stage": ..., "message": ...}`` event where every client of a
run looks for progress:

- LangGraph's ``custom`` stream mode (``get_stream_writer``): the command line draws it on stderr
  (as it does the graphs' own progress events), MCP sends it as progress notifications, and the SDK
  receives it from a ``langgraph dev`` or Aegra deployment (``stream_mode=["custom", ...]``);
- a LangChain custom event named :data:`STATUS_EVENT` (``dispatch_custom_event``): LangServe's
  ``stream_events`` (and ``astream_events``) show it as an ``on_custom_event``;
- in a node that asks for it (wrapped in :func:`in_chat`: the chat workflow's nodes), the words
  of an AI message in LangGraph's ``messages`` stream (:func:`show_status`), which chat clients
  (Agent Chat UI, Studio's chat) show as the reply being written. The message is never returned by
  the node, so the thread does not keep it: a client that draws the thread's values over the
  streamed messages (the SDK's ``useStream``) drops it when the step ends, and the answer takes
  its place.

Outside a run (a model call made directly) it does nothing.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

Params = ParamSpec("Params")
Result = TypeVar("Result")

_in_chat: contextvars.ContextVar[bool] = contextvars.ContextVar("status_in_chat", default=False)
"""True while a node wrapped in :func:`in_chat` runs."""

STATUS_EVENT = "longdoc_status"
"""The name of the custom event a status is dispatched as (``on_custom_event`` in ``stream_events``)."""

STATUS_ID_PREFIX = "status-"
"""How the id of a status message starts (the rest is the step's task id): clients that want answers only skip it."""


def is_status(message_id: Any) -> bool:
    """True for the id of a status message streamed by :func:`show_status`."""
    return isinstance(message_id, str) and message_id.startswith(STATUS_ID_PREFIX)


def progress_line(event: Any) -> str:
    """What a progress event of the ``custom`` stream says ('' for nothing to report): ingesting N of M, ..."""
    if not isinstance(event, dict) or not event.get("stage"):
        return ""
    stage = str(event["stage"])
    if stage == "loaded" and event.get("title") and not event.get("cached"):
        return f"reading {event['title']}"
    if not event.get("total"):
        return ""
    if stage == "embed":
        return f"ingesting: {event.get('done', 0)} of {event['total']} chunks embedded"
    return f"{stage}: {event.get('done', 0)} of {event['total']}"


def show_status(message: str) -> None:
    """Stream ``message`` as a line of the current step's status message (in a node wrapped in :func:`in_chat`).

    One AI message per step (its id :data:`STATUS_ID_PREFIX` and the step's task id); each line is
    streamed as a token of it, after a blank line, so the message reads as the step's lines with
    the newest last (clients join the tokens of one message id). Never fails the step.
    """
    from langchain_core.runnables.config import ensure_config

    if not _in_chat.get():
        return
    metadata = ensure_config().get("metadata") or {}
    task = str(metadata.get("langgraph_checkpoint_ns") or "").rpartition(":")[2]
    from stores.chat_stream import stream_more

    line = message.replace("_", "\\_")
    stream_more(f"{STATUS_ID_PREFIX}{task or metadata.get('langgraph_node', 'step')}", f"\n\n_{line}_")


def status_progress(writer: Callable[[Any], None]) -> Callable[[Any], None]:
    """``writer`` (a node's ``custom`` stream writer) that also shows each progress event's line as a status."""

    def emit(event: Any) -> None:
        writer(event)
        line = progress_line(event)
        if line:
            show_status(line)

    return emit


def in_chat(node: Callable[Params, Result], message: str = "") -> Callable[Params, Result]:
    """``node`` whose statuses are streamed as a chat message too (:func:`show_status`), ``message`` first if given.

    ``message`` is shown as the step starts: its model call may report nothing until it ends.
    """

    @functools.wraps(node)
    def run(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        token = _in_chat.set(True)
        try:
            if message:
                show_status(message)
            return node(*args, **kwargs)
        finally:
            _in_chat.reset(token)

    return run


def report_status(stage: str, message: str, **extra: Any) -> None:
    """Show ``message`` (of step ``stage``) to whoever streams the current run.

    Never fails the step that reports it: a status that cannot be delivered is dropped.
    """
    event = {"stage": stage, "message": message, **extra}
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()(event)
    except (RuntimeError, KeyError):
        pass  # not inside a graph run
    try:
        from langchain_core.callbacks.manager import dispatch_custom_event
        from langchain_core.runnables.config import ensure_config

        dispatch_custom_event(STATUS_EVENT, event, config=ensure_config())
    except RuntimeError:
        pass  # no run to attach it to
    show_status(message)
