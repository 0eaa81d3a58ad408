"""The agents of the Chain-of-Agents workflow: the orderer, the planner, the worker and the manager, a file each.

- :mod:`nodes.chain.context` and :mod:`nodes.chain.state`: ``ChainContext`` (the settings) and the input,
  output and state schemas;
- :mod:`nodes.chain.orderer`: the ``orderer`` (the document, its cached Chow-Liu tree, the chains' order or roots);
- :mod:`nodes.chain.planner`: the ``planner`` (which passages each worker reads next, and when reading stops);
- :mod:`nodes.chain.worker`: the ``worker`` (quotes from the passages it reads, what is still missing);
- :mod:`nodes.chain.manager`: the ``manager`` (the cited answer from every chain's quotes);
- :mod:`nodes.chain.passages`: passages, sentence labels and the evidence the workers pass on;
- :mod:`nodes.chain.reading`: the reading policy (scores of the next passages);
- :mod:`nodes.chain.ordering`: the ordering algorithms (Chow-Liu tree, traversals, fixed orders);
- :mod:`nodes.chain.baselines`: the single-call top-k baseline the benchmarks compare against;
- :mod:`nodes.chain.tree_view`: the tree as an HTML page.
"""
