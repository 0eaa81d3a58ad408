"""Context offloading with a Mermaid canvas: a multi-turn session over one document, small working memory.

One invocation is one turn; a session is one checkpointed thread (the same ``thread_id`` every
turn). Input: ``question`` or a new human message in ``messages`` (+ ``path`` or ``doc_id`` on the
first turn, or the context's ``doc_id``; optional ``goal``). Chat clients read the answers in
``messages``, where only the answering call streams (:mod:`nodes.offload.chat`, :mod:`stores.chat_stream`).

    begin -> [canvas] -> retrieve -> answer -> [recall -> answer] -> offload

* **begin**: checks the turn, ingests ``path`` on the first turn, binds the session to its document.
* **canvas** (policy ``offload_canvas``, once per document, cached): the canvas writer returns the
  document's structure as schema-enforced JSON, drawn as Mermaid in code (:mod:`nodes.offload.canvas`).
* **retrieve**: details for this turn: chunks over a relevance threshold, and the chunks of the
  canvas nodes the question touches.
* **answer**: working memory = system + canvas + pinned state + history + details (+ recalled) +
  question, cut to ``token_budget``; the model answers with chunk citations, or asks to recall
  offloaded ids (at most one recall round per turn; unknown ids get a note, not an error).
* **offload**: the offloader turns the finished exchange into a one-line conclusion and facts to
  pin, moves the raw exchange to the offload store under ``o<turn>`` (a large answer under
  ``o<turn>a``), and keeps the last turns' conclusions in state.

The memory policy (context ``policy``: full, last_k, offload, offload_canvas) decides what the
history holds, so one graph serves the product and its baselines. State keeps ids and short
texts (questions, conclusions, pinned facts), never the document. Output per turn: ``answer``,
``citations``, ``input_tokens`` of the answering call, ``offloaded``, ``recalled``, ``cut`` and
the estimated size of each part of the working memory; the answer is also appended to ``messages``
as an AI message carrying its citations, offloaded and recalled ids.

Modules, in the order a turn meets them:

- :mod:`nodes.offload.context`: ``OffloadContext`` (the settings); :mod:`nodes.offload.state`: the input,
  output and state schemas;
- :mod:`nodes.offload.session`: ``begin`` and ``refuse``; :mod:`nodes.offload.canvas_writer`: ``canvas``;
- :mod:`nodes.offload.answer`: ``retrieve``, ``answer`` and ``recall``;
- :mod:`nodes.offload.offloader`: ``offload``;
- this module: the graph, wired as drawn above.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from nodes.offload.answer import answer, recall, retrieve, route_answer
from nodes.offload.canvas_writer import canvas
from nodes.offload.context import OffloadContext
from nodes.offload.offloader import offload
from nodes.offload.session import begin, refuse, route_begin
from nodes.offload.state import OffloadInput, OffloadOutput, OffloadState
from stores.models import model_retry
from stores.status import in_chat

_retry = model_retry()

builder = StateGraph(
    OffloadState, context_schema=OffloadContext, input_schema=OffloadInput, output_schema=OffloadOutput
)
# each step's statuses are streamed as a transient chat message too (stores.status.in_chat)
builder.add_node("begin", in_chat(begin))
builder.add_node("refuse", refuse)
builder.add_node("canvas", in_chat(canvas), retry_policy=_retry)
builder.add_node("retrieve", in_chat(retrieve))
builder.add_node("answer", in_chat(answer, "writing the answer..."), retry_policy=_retry)
builder.add_node("recall", recall)
builder.add_node("offload", in_chat(offload, "noting this turn for the next ones..."), retry_policy=_retry)
builder.add_edge(START, "begin")
builder.add_conditional_edges("begin", route_begin, ["refuse", "canvas", "retrieve"])
builder.add_edge("canvas", "retrieve")
builder.add_edge("retrieve", "answer")
builder.add_conditional_edges("answer", route_answer, ["recall", "offload"])
builder.add_edge("recall", "answer")
builder.add_edge("offload", END)
builder.add_edge("refuse", END)

graph = builder.compile()
graph.name = "chat"
