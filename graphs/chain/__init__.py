"""The Chain-of-Agents workflow: questions answered by reading a document's chunks along its Chow-Liu tree.

    orderer -> planner -> worker -> planner -> worker -> ... -> planner -> manager

- :mod:`nodes.chain.state`: ``ChainContext`` (the settings), the input, output and state schemas;
- :mod:`graphs.chain.graph`: ``builder`` and ``graph``, wired as drawn above.

The nodes are the agents of :mod:`nodes.chain`: the orderer and the planner, the worker, the manager.
"""
