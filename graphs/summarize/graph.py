"""Summarization by an editor agent that questions expert agents, then fact-checks every sentence.

The graph is wired as drawn in :mod:`graphs.summarize`.

Flow (``method="expert-editor"``): prepare (resolve the document: ``doc_id``, or a ``path`` or ``text`` it
ingests) -> overview (headings and first chunks) -> each round: the editor writes 3-5 questions
(schema-enforced JSON), aimed at the parts of the focus and the topics of the document the draft does not
cover yet -> experts answer in parallel (``Send``), each from chunks it retrieves (vector + BM25) with
``[chunk_id]`` citations and a confidence -> the editor merges the answers into the draft (answers it
leaves out are appended) and judges it -> another round (also when the draft is still short), or polish
(told the draft's length and the accepted range) -> fit_length (within +-25% of the length: trim at
sentence boundaries, fill from unused cited answers, then from the chunks' sentences) -> fact-check (the
checker model and a grounding check of numbers, names and content words against the cited chunks) ->
finish. ``method="map-reduce"`` and ``method="refine"`` run the baselines of ``graphs.summarize.baselines``
instead of the rounds, then the same length fit and fact-check.

The state holds the document id, never its text. Output: ``summary``, ``sentences`` with their
citations, fact-check verdicts and origin, the question/answer ``log`` by round, ``rounds``,
``usage`` (tokens in/out and calls per role), ``stop_reason``, ``factcheck`` counts (with the
sentences each check flagged) and ``fit`` (the length reached against the target). Progress is
streamed as custom events (``stream_mode="custom"``).

Modules, in the order a run meets them:

- :mod:`nodes.summarize.context`: ``SummarizeContext`` (the settings); :mod:`nodes.summarize.state`: the input,
  output and state schemas;
- :mod:`nodes.summarize.request`: ``prepare`` (and ``route_method``) and ``finish``;
- :mod:`nodes.summarize.editor`: ``overview``, ``questions``, ``merge`` (and ``after_merge``) and ``polish``;
- :mod:`nodes.summarize.expert`: ``send_questions`` and ``expert``;
- :mod:`nodes.summarize.length`: ``fit_length``; :mod:`nodes.summarize.fact_checker`: ``factcheck``;
- :mod:`graphs.summarize.baselines`: the map-reduce and refine subgraphs;
- this module: the graph, wired as described above.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graphs.summarize.baselines import RETRY, map_reduce_graph, refine_graph
from nodes.summarize.context import SummarizeContext
from nodes.summarize.editor import after_merge, merge, overview, polish_node, questions
from nodes.summarize.expert import expert, send_questions
from nodes.summarize.fact_checker import factcheck
from nodes.summarize.length import fit_length
from nodes.summarize.request import finish, prepare, route_method
from nodes.summarize.state import SummarizeInput, SummarizeOutput, SummarizeState

builder = StateGraph(
    SummarizeState, context_schema=SummarizeContext, input_schema=SummarizeInput, output_schema=SummarizeOutput
)
builder.add_node("prepare", prepare)
builder.add_node("overview", overview)
builder.add_node("questions", questions, retry_policy=RETRY)
builder.add_node("expert", expert)
builder.add_node("merge", merge, retry_policy=RETRY)
builder.add_node("polish", polish_node, retry_policy=RETRY)
builder.add_node("map_reduce", map_reduce_graph())
builder.add_node("refine", refine_graph())
builder.add_node("fit_length", fit_length)
builder.add_node("factcheck", factcheck, retry_policy=RETRY)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_conditional_edges("prepare", route_method, ["overview", "polish", "map_reduce", "refine", "factcheck"])
builder.add_edge("overview", "questions")
builder.add_conditional_edges("questions", send_questions, ["expert", "polish"])
builder.add_edge("expert", "merge")
builder.add_conditional_edges("merge", after_merge, ["questions", "polish"])
builder.add_edge("polish", "fit_length")
builder.add_edge("map_reduce", "fit_length")
builder.add_edge("refine", "fit_length")
builder.add_edge("fit_length", "factcheck")
builder.add_edge("factcheck", "finish")
builder.add_edge("finish", END)

graph = builder.compile()
graph.name = "summarize"
