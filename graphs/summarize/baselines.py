"""The baselines' wiring: LangGraph map-reduce and refine (nodes in :mod:`nodes.summarize.baselines`).

They run as subgraphs of :mod:`graphs.summarize.graph` (selected by ``method``) and on their own
(``map_reduce_graph()``, ``refine_graph()``: each compiled once, on first use, and shared).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph

from nodes.summarize.baselines import (
    collapse,
    collect_notes,
    fan_out,
    map_chunk,
    more_chunks,
    needs_collapse,
    plan_chunks,
    plan_refine,
    reduce_notes,
    refine_step,
)
from nodes.summarize.context import BaselineContext
from nodes.summarize.state import BaselineInput, BaselineOutput, MapReduceState, RefineState
from stores.cache import lru_cache
from stores.models import model_retry

RETRY = model_retry()


def build_map_reduce() -> StateGraph[MapReduceState, BaselineContext, BaselineInput, BaselineOutput]:
    """The map-reduce graph builder."""
    builder = StateGraph(
        MapReduceState, context_schema=BaselineContext, input_schema=BaselineInput, output_schema=BaselineOutput
    )
    builder.add_node("plan_chunks", plan_chunks)
    builder.add_node("map_chunk", map_chunk, retry_policy=RETRY)
    builder.add_node("collect_notes", collect_notes)
    builder.add_node("collapse", collapse, retry_policy=RETRY)
    builder.add_node("reduce_notes", reduce_notes, retry_policy=RETRY)
    builder.add_edge(START, "plan_chunks")
    builder.add_conditional_edges("plan_chunks", fan_out, ["map_chunk"])
    builder.add_edge("map_chunk", "collect_notes")
    builder.add_conditional_edges("collect_notes", needs_collapse, {"collapse": "collapse", "reduce": "reduce_notes"})
    builder.add_conditional_edges("collapse", needs_collapse, {"collapse": "collapse", "reduce": "reduce_notes"})
    builder.add_edge("reduce_notes", END)
    return builder


def build_refine() -> StateGraph[RefineState, BaselineContext, BaselineInput, BaselineOutput]:
    """The refine graph builder."""
    builder = StateGraph(
        RefineState, context_schema=BaselineContext, input_schema=BaselineInput, output_schema=BaselineOutput
    )
    builder.add_node("plan_refine", plan_refine)
    builder.add_node("refine_step", refine_step, retry_policy=RETRY)
    builder.add_edge(START, "plan_refine")
    builder.add_conditional_edges("plan_refine", more_chunks, ["refine_step", END])
    builder.add_conditional_edges("refine_step", more_chunks, ["refine_step", END])
    return builder


@lru_cache(maxsize=1)
def map_reduce_graph() -> Any:
    """The map-reduce graph, compiled once (without a checkpointer), named ``map-reduce``."""
    graph = build_map_reduce().compile()
    graph.name = "map-reduce"
    return graph


@lru_cache(maxsize=1)
def refine_graph() -> Any:
    """The refine graph, compiled once (without a checkpointer), named ``refine``."""
    graph = build_refine().compile()
    graph.name = "refine"
    return graph
