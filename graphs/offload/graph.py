"""Context offloading with a Mermaid canvas: a multi-turn session over one document, small working memory.

One invocation is one turn; a session is one checkpointed thread (the same ``thread_id`` every
turn). Input: ``question`` or a new human message in ``messages`` (+ ``path`` or ``doc_id`` on the
first turn, or the context's ``doc_id``; optional ``goal``). Chat clients read the answers in
``messages``, where only the answering call streams (:mod:`nodes.offload.chat`, :mod:`stores.chat_stream`).

    begin -> [canvas] -> focus -> [read] -> answer -> [recall -> answer] -> offload

* **begin**: checks the turn, ingests ``path`` on the first turn, binds the session to its document.
* **canvas** (policy ``offload_canvas``, once per document, cached): the canvas writer returns the
  document's structure as schema-enforced JSON, drawn as Mermaid in code (:mod:`nodes.offload.canvas`).
* **focus**: whether the turn needs the documents (a turn about the conversation itself, "thanks" or "say it
  shorter", reads nothing) and the question they are read for, made standalone from the conversation on a
  later turn by one small model call ("What supplier did they find?" -> "... did Bob Chen find?"): ``asked``.
* **read**: ask's reading (:data:`graphs.chain.graph.reading`: orderer, planner, workers with quotes,
  best-first over the Chow-Liu tree) over the session's documents for ``asked``, within ``read_budget``; the
  quotes it kept are the turn's evidence. One reading serves ask and chat.
* **answer**: working memory = system + canvas + pinned state + history + the quotes (+ recalled) +
  question, cut to ``token_budget``; the model answers citing the quotes' labels, or asks to recall
  offloaded ids (at most one recall round per turn; unknown ids get a note, not an error). The quotes it
  cites are the turn's sources on every surface.
* **offload**: the offloader turns the finished exchange into a one-line conclusion and facts to
  pin, moves the raw exchange to the offload store under ``o<turn>`` (a large answer under
  ``o<turn>a``), and keeps the last turns' conclusions in state.

The memory policy (context ``policy``: full, last_k, offload, offload_canvas) decides what the
history holds, so one graph serves the product and its baselines. State keeps ids and short
texts (questions, conclusions, pinned facts, the last reading's quotes), never the document. Output per
turn: ``answer``, ``asked``, ``sources``, ``citations``, ``read``, ``input_tokens`` of the answering call,
``offloaded``, ``recalled``, ``cut`` and the estimated size of each part of the working memory; the answer
is also appended to ``messages`` as an AI message carrying its sources, citations, offloaded and recalled ids.

Modules, in the order a turn meets them:

- :mod:`nodes.offload.context`: ``OffloadContext`` (the settings); :mod:`nodes.offload.state`: the input,
  output and state schemas;
- :mod:`nodes.offload.session`: ``begin`` and ``refuse``; :mod:`nodes.offload.canvas_writer`: ``canvas``;
- :mod:`nodes.offload.reading`: ``focus`` and ``read`` (over ask's reading graph, :mod:`graphs.chain.graph`);
- :mod:`nodes.offload.answer`: ``answer`` and ``recall``;
- :mod:`nodes.offload.offloader`: ``offload``;
- this module: the graph, wired as drawn above.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graphs.chain.graph import reading
from nodes.offload.answer import answer, recall, route_answer
from nodes.offload.canvas_writer import canvas
from nodes.offload.context import OffloadContext
from nodes.offload.offloader import offload
from nodes.offload.reading import Reader, focus, route_focus
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
builder.add_node("focus", in_chat(focus), retry_policy=_retry)
builder.add_node("read", in_chat(Reader(reading)))
builder.add_node("answer", in_chat(answer, "writing the answer..."), retry_policy=_retry)
builder.add_node("recall", recall)
builder.add_node("offload", in_chat(offload, "noting this turn for the next ones..."), retry_policy=_retry)
builder.add_edge(START, "begin")
builder.add_conditional_edges("begin", route_begin, ["refuse", "canvas", "focus"])
builder.add_edge("canvas", "focus")
builder.add_conditional_edges("focus", route_focus, ["read", "answer"])
builder.add_edge("read", "answer")
builder.add_conditional_edges("answer", route_answer, ["recall", "offload"])
builder.add_edge("recall", "answer")
builder.add_edge("offload", END)
builder.add_edge("refuse", END)

graph = builder.compile()
graph.name = "chat"
