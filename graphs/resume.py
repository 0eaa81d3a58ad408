"""What to do with a checkpointed thread whose last run did not finish (killed, crashed, model down).

A run on a thread leaves an ``input`` checkpoint holding its input, then one checkpoint per step.
When the last run stopped half-way, the next call on the thread either

- **resumes** it, when it brings the same input again (what a LangServe client or a re-run CLI
  command does) or no input: only the unfinished steps run, finished model calls are not redone
  and their usage is counted once; or
- **rolls it back**, when it brings another input (a chat session's next question after a turn
  that died): the new run starts from the last finished checkpoint, as if the unfinished run had
  never started (no skipped turn number, nothing half-done carried over).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import START

Plan = tuple[Any, RunnableConfig]


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _with_checkpoint(config: RunnableConfig, checkpoint: RunnableConfig) -> RunnableConfig:
    configurable = {**(config.get("configurable") or {})}
    configurable["checkpoint_id"] = (checkpoint.get("configurable") or {})["checkpoint_id"]
    return {**config, "configurable": configurable}


def _decide(graph_input: Any, started_with: Any, start: Any) -> str:
    if graph_input is None or _same(started_with, graph_input):
        return "resume"
    return "fork" if start.parent_config else "restart"


def plan(graph: Any, graph_input: Any, config: RunnableConfig) -> Plan:
    """The input and config to run ``graph_input`` with on ``config``'s thread (see the module)."""
    if graph.checkpointer is None or not graph.get_state(config).next:
        return graph_input, config
    start = next((s for s in graph.get_state_history(config) if s.metadata.get("source") == "input"), None)
    if start is None:
        return graph_input, config
    saved = graph.checkpointer.get_tuple(start.config)
    started_with = saved.checkpoint["channel_values"].get(START) if saved else None
    decision = _decide(graph_input, started_with, start)
    if decision == "resume":
        return None, config
    if decision == "fork":
        return graph_input, _with_checkpoint(config, start.parent_config)
    graph.checkpointer.delete_thread(str((config.get("configurable") or {})["thread_id"]))
    return graph_input, config


async def aplan(graph: Any, graph_input: Any, config: RunnableConfig) -> Plan:
    """:func:`plan` for async callers (the LangServe app)."""
    if graph.checkpointer is None or not (await graph.aget_state(config)).next:
        return graph_input, config
    start = None
    async for snapshot in graph.aget_state_history(config):
        if snapshot.metadata.get("source") == "input":
            start = snapshot
            break
    if start is None:
        return graph_input, config
    saved = await graph.checkpointer.aget_tuple(start.config)
    started_with = saved.checkpoint["channel_values"].get(START) if saved else None
    decision = _decide(graph_input, started_with, start)
    if decision == "resume":
        return None, config
    if decision == "fork":
        return graph_input, _with_checkpoint(config, start.parent_config)
    await graph.checkpointer.adelete_thread(str((config.get("configurable") or {})["thread_id"]))
    return graph_input, config
