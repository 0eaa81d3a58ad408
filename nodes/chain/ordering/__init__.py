"""Chow-Liu ordering of chunks for the Chain-of-Agents.

The tree is a maximum spanning tree of the chunks' similarity graph. It is query-independent and
can be cached per document; the root and the traversal depend on the question.

Determinism: the same input gives the same tree (the only randomness is the seeded k-means of the
inverted-file search); root choice, child order and the relevance order break ties towards the lower
chunk index.

Modules, in the order a request meets them:

- :mod:`nodes.chain.ordering.tree`: ``ChowLiuTree``, the similarity weights, the exact (dense) tree and
  ``build_tree``, which picks the exact or the sparse construction;
- :mod:`nodes.chain.ordering.neighbours`: each chunk's nearest neighbours, in row blocks, exhaustive or
  by an inverted-file search (the sparse construction's first step);
- :mod:`nodes.chain.ordering.sparse`: Boruvka's algorithm over the neighbour lists (the sparse tree);
- :mod:`nodes.chain.ordering.traverse`: roots (``choose_root``, ``multi_roots``) and ``traverse`` (BFS, DFS);
- :mod:`nodes.chain.ordering.orders`: ``ORDERS`` and ``order_chunks``, the permutation the workers read in.
"""
