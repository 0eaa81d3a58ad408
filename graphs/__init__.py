"""The workflows, one folder each (``chain``, ``summarize``, ``offload``, ``route``) plus :mod:`graphs.ingest`.

Each folder holds its wiring (``graph.py``: ``builder``, and ``graph`` compiled without a checkpointer); its
``__init__`` draws the graph and re-exports the workflow's settings and schemas, which sit with its nodes in
:mod:`nodes` (``nodes/<workflow>/context.py`` and ``state.py``; :mod:`nodes.context` is the ``Context`` every
workflow's settings extend), so that the nodes never import a graph.
"""
