"""The Chain-of-Agents workflow: questions answered by reading a document's chunks along its Chow-Liu tree.

    orderer -> planner -> worker -> planner -> worker -> ... -> planner -> manager

- :mod:`graphs.chain.graph`: ``builder`` and ``graph``, wired as drawn above.

The nodes are the agents of :mod:`nodes.chain`: the orderer and the planner, the worker, the manager. The
settings (``ChainContext``, :mod:`nodes.chain.context`) and the input, output and state schemas
(:mod:`nodes.chain.state`) sit beside them, and are re-exported here.
"""

from nodes.chain.context import ChainContext
from nodes.chain.state import ChainInput, ChainOutput, ChainState

__all__ = ["ChainContext", "ChainInput", "ChainOutput", "ChainState"]
