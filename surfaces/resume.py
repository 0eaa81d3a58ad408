"""What to do with a checkpointed thread whose last run did not finish (killed, crashed, model down).

A run on a thread leaves an ``input`` checkpoint holding its input, then one checkpoint per step.
When the last run stopped half-way, the next call on the thread either

- **resumes** it, when it brings the same input again (what a LangServe client or a re-run CLI
  command does) or no input: only the unfinished steps run, finished model calls are not redone
  and their usage is counted once; or
- **starts it over** from the step before it, when it died of bad model output
  (``ModelOutputError``): its failed step would only run again on the same saved values;
- **rolls it back**, when it brings another input (a chat session's next question after a turn
  that died): the new run starts from the last finished checkpoint, as if the unfinished run had
  never started (no skipped turn number, nothing half-done carried over).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import START

from nodes.ingest import check_input_sizes
from stores.checkpoint import atruncate_log, truncate_log
from stores.errors import InputError
from stores.models import ModelOutputError

Plan = tuple[Any, RunnableConfig]


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _with_checkpoint(config: RunnableConfig, checkpoint: RunnableConfig) -> RunnableConfig:
    configurable = {**(config.get("configurable") or {})}
    configurable["checkpoint_id"] = (checkpoint.get("configurable") or {})["checkpoint_id"]
    return {**config, "configurable": configurable}


def _died_of_bad_output(tasks: Any) -> bool:
    """Whether the run stopped on a step whose model kept answering badly (``ModelOutputError``).

    Such a step failed on what the finished steps saved; resuming would only run it on the same
    saved values again, so the run starts over instead.
    """
    errors = [str(task.error) for task in tasks if task.error is not None]
    return bool(errors) and all(error.startswith(f"{ModelOutputError.__name__}(") for error in errors)


def _decide(graph_input: Any, saved: Any, start: Any, tasks: Any = ()) -> str:
    """``resume`` the dead run, ``fork`` from before its start, or ``restart`` on an emptied thread.

    ``saved``: the checkpoint tuple of the dead run's start (its input is what it started with).
    """
    started_with = saved.checkpoint["channel_values"].get(START) if saved else None
    if graph_input is None or (_same(started_with, graph_input) and not _died_of_bad_output(tasks)):
        return "resume"
    return "fork" if start.parent_config else "restart"


def _planned(decision: str, graph_input: Any, config: RunnableConfig, start: Any) -> Plan:
    """The input and config a run goes on with once ``decision`` is made (a restart's thread already emptied)."""
    if decision == "resume":
        return None, config
    if decision == "fork":
        return graph_input, _with_checkpoint(config, start.parent_config)
    return graph_input, config


def plan(graph: Any, graph_input: Any, config: RunnableConfig) -> Plan:
    """The input and config to run ``graph_input`` with on ``config``'s thread (see the module).

    An oversized question is refused here, before the run writes anything.
    """
    check_input_sizes(graph_input)
    state = graph.get_state(config) if graph.checkpointer is not None else None
    if state is None or not state.next:
        return graph_input, config
    start = next((s for s in graph.get_state_history(config) if s.metadata.get("source") == "input"), None)
    if start is None:
        return graph_input, config
    decision = _decide(graph_input, graph.checkpointer.get_tuple(start.config), start, state.tasks)
    if decision == "restart":
        graph.checkpointer.delete_thread(str((config.get("configurable") or {})["thread_id"]))
    return _planned(decision, graph_input, config, start)


async def aplan(graph: Any, graph_input: Any, config: RunnableConfig) -> Plan:
    """:func:`plan` for async callers (the LangServe app)."""
    check_input_sizes(graph_input)
    state = await graph.aget_state(config) if graph.checkpointer is not None else None
    if state is None or not state.next:
        return graph_input, config
    start = None
    async for snapshot in graph.aget_state_history(config):
        if snapshot.metadata.get("source") == "input":
            start = snapshot
            break
    if start is None:
        return graph_input, config
    decision = _decide(graph_input, await graph.checkpointer.aget_tuple(start.config), start, state.tasks)
    if decision == "restart":
        await graph.checkpointer.adelete_thread(str((config.get("configurable") or {})["thread_id"]))
    return _planned(decision, graph_input, config, start)


def _thread(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id") or "")


@contextlib.contextmanager
def forget_refused(graph: Any, config: RunnableConfig) -> Iterator[None]:
    """Delete the thread of a refused run (``InputError``) that had no checkpoint before it.

    Nothing stays of it, in the checkpoint database's write-ahead log either
    (:func:`stores.checkpoint.truncate_log`).
    """
    saver = getattr(graph, "checkpointer", None)
    fresh = saver is not None and bool(_thread(config)) and saver.get_tuple(config) is None
    try:
        yield
    except InputError:
        if fresh and saver is not None:
            saver.delete_thread(_thread(config))
            truncate_log(saver)
        raise


@contextlib.asynccontextmanager
async def aforget_refused(graph: Any, config: RunnableConfig) -> AsyncIterator[None]:
    """:func:`forget_refused` for the asyncio runs of the LangServe app."""
    saver = getattr(graph, "checkpointer", None)
    fresh = saver is not None and bool(_thread(config)) and await saver.aget_tuple(config) is None
    try:
        yield
    except InputError:
        if fresh and saver is not None:
            await saver.adelete_thread(_thread(config))
            await atruncate_log(saver)
        raise
