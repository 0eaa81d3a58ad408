"""The agents of the Chain-of-Agents workflow: the orderer and the planner, the worker, the manager.

- :mod:`nodes.chain.planner`: the ``orderer`` (the document's Chow-Liu tree and the agent order) and the
  ``planner`` (which chunk each worker reads next, and when reading stops);
- :mod:`nodes.chain.agents`: the ``worker`` and the ``manager`` nodes;
- :mod:`nodes.chain.core`: their model calls, the notes passed along the chain, the cached tree;
- :mod:`nodes.chain.reading`: the reading policy (scores of the next chunk);
- :mod:`nodes.chain.ordering`: the ordering algorithms (Chow-Liu tree, traversals, fixed orders);
- :mod:`nodes.chain.tree_view`: the tree as an HTML page.
"""
