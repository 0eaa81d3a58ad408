"""Status lines a run shows while a long step has nothing else to show (the model reading a long prompt).

:func:`report_status` sends one ``{"stage": ..., "message": ...}`` event where every client of a
run looks for progress:

- LangGraph's ``custom`` stream mode (``get_stream_writer``): the command line draws it on stderr
  (as it does the graphs' own progress events), and Studio, the SDK and Agent Chat UI receive it
  from a ``langgraph dev`` or Aegra deployment (``stream_mode=["custom", ...]``);
- a LangChain custom event named :data:`STATUS_EVENT` (``dispatch_custom_event``): LangServe's
  ``stream_events`` (and ``astream_events``) show it as an ``on_custom_event``.

Outside a run (a model call made directly) it does nothing.
"""

from __future__ import annotations

from typing import Any

STATUS_EVENT = "longdoc_status"
"""The name of the custom event a status is dispatched as (``on_custom_event`` in ``stream_events``)."""


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
