"""Chain-of-Agents question answering with anytime reading over the Chow-Liu tree.

    orderer -> planner -> worker -> planner -> worker -> ... -> planner -> manager

``reading`` is the same graph without the manager: it ends with the quotes the chains gathered, for a
workflow that answers from them in its own way (a chat turn about the documents, :mod:`graphs.offload`).

The orderer ingests the document if a path is given, loads (or builds and caches) the Chow-Liu
tree over its chunks and, for fixed orders, plans the order(s). Before every worker the planner
chooses the next chunk (best-first along the tree, scored by the question and by what the notes
say is still missing; or the next chunk of a fixed order) or ends the chain: when the notes answer
the question (``complete``), when the next chunk would exceed the reading budget (``budget``), or
when nothing above the relevance floor is left (``end``). Each worker reads one chunk and passes
the notes on. With multi-root voting several chains run one after the other and the manager
reconciles their last notes. See :mod:`nodes.chain.reading` for the scores.

Modules, in the order a run meets them:

- :mod:`nodes.chain.context`: ``ChainContext`` (the settings); :mod:`nodes.chain.state`: the input, output and
  state schemas;
- :mod:`nodes.chain.orderer`: the ``orderer`` node; :mod:`nodes.chain.planner`: the ``planner`` node (and
  ``next_step``);
- :mod:`nodes.chain.worker`: the ``worker`` node; :mod:`nodes.chain.manager`: the ``manager`` node;
- this module: the graph, wired as drawn above.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from nodes.chain.context import ChainContext
from nodes.chain.manager import manager
from nodes.chain.orderer import orderer
from nodes.chain.planner import next_step, planner
from nodes.chain.state import ChainInput, ChainOutput, ChainState
from nodes.chain.worker import worker
from stores.models import model_retry

_retry = model_retry()


def _wired(answers: bool) -> StateGraph[ChainState, ChainContext, ChainInput, ChainOutput]:
    """The chain's wiring; with ``answers`` the manager writes the answer, else the run ends with the quotes."""
    wired = StateGraph(ChainState, context_schema=ChainContext, input_schema=ChainInput, output_schema=ChainOutput)
    wired.add_node("orderer", orderer)
    wired.add_node("planner", planner)
    wired.add_node("worker", worker, retry_policy=_retry)
    wired.add_edge(START, "orderer")
    wired.add_edge("orderer", "planner")
    if answers:
        wired.add_node("manager", manager, retry_policy=_retry)
        wired.add_conditional_edges("planner", next_step)
        wired.add_edge("manager", END)
    else:
        wired.add_conditional_edges("planner", next_step, {"worker": "worker", "manager": END})
    wired.add_edge("worker", "planner")
    return wired


builder = _wired(answers=True)

RECURSION_LIMIT = 100_000
"""Every worker is one graph step: allow chains over very long documents."""

graph = builder.compile().with_config(recursion_limit=RECURSION_LIMIT)
graph.name = "ask"

# never checkpointed on its own: a node of another workflow runs it whole, and that node's step is what resumes
reading = _wired(answers=False).compile(checkpointer=False).with_config(recursion_limit=RECURSION_LIMIT)
reading.name = "reading"
"""The reading alone (no manager): its output's ``notes`` are the quotes every chain gathered."""
