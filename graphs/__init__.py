"""The workflows, one folder each (``chain``, ``summarize``, ``offload``, ``route``) plus :mod:`graphs.ingest`.

Each folder holds its wiring (``graph.py``: ``builder``, and ``graph`` compiled without a checkpointer), its
state schemas and its settings; its ``__init__`` draws the graph. :mod:`nodes.context` is the ``Context``
every workflow's settings extend. The nodes are the agents of :mod:`nodes`.
"""
