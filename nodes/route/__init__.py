"""The router (Agent-as-a-Graph): pick the right agent, and the tools that justify it, for a request.

The registry is a bipartite graph: agent nodes (name, description) and tool nodes (name,
description, parameters), each tool owned by one agent (``tool -> agent`` edges). A tool name
shared by several agents is one tool node per owner. Agents and tools are embedded into the shared
vector store (kinds ``agent`` and ``tool``) of a namespace, under the document id
``registry-<name>``; a registry's content hash (and each record's own hash) makes re-registering an
unchanged registry embed nothing, and a changed one embed only what changed.

Routing a request:

1. Candidates: the top ``N`` agents and, separately, the top ``N`` tools by vector similarity
   (``N = candidates_factor x K``); with BM25 on, the top ``N`` agents and tools by BM25 as well.
2. Type-weighted reciprocal rank fusion: a node's score is the sum, over the lists it appears in,
   of ``weight / (rrf_k + rank)`` (rank from 1), where ``weight`` is ``agent_weight`` for agent
   lists and ``tool_weight`` for tool lists, times ``bm25_weight`` for the BM25 lists. A list
   whose weight is 0 is not used (weights ``1:0`` are agent-only retrieval, ``0:1`` tool-only).
3. Walk: the fused list is read best first; an agent node contributes itself, a tool node its
   owner. With ``aggregate="first"`` (the write-up's walk) it stops at ``K`` distinct agents and an
   agent scores the fused score of the node that brought it in; with ``aggregate="sum"`` (the
   default) an agent scores its own node plus its best tool node, i.e. both terms of
   ``a_agent / (k + rank_agent) + a_tool / (k + rank_tool)`` for the same agent, and the ``K``
   best are kept. An agent's evidence is the list of its tools among the candidates, best first.
   The top tools are the tool nodes of the fused list, best first.

With separate agent and tool lists each node sits in one list only, so with ``rrf_k`` 60 and
1.5:1 the first walk reads about the 30 best agents before the best tool: it is agent-only
retrieval in all but name. The defaults (``RouteSettings``) come from the LiveMCPBench sweep.

Everything here except registration and the store-backed index is a pure function of its
arguments, so fusion and walking can be tested and benchmarked without a store.

Modules, in the order a request meets them:

- :mod:`nodes.route.router`: the route workflow's nodes, ``register`` and ``route``;
- :mod:`nodes.route.model`: the registry model (``Agent``, ``Tool``, ``Registry``), names, record ids;
- :mod:`nodes.route.mcp`: reading and validating the MCP servers format, the built-in registry;
- :mod:`nodes.route.manifest`: registration in the store and the registered copy;
- :mod:`nodes.route.indexes`: BM25, in-memory and store-backed vector retrieval;
- :mod:`nodes.route.fusion`: settings, reciprocal rank fusion and the walk (pure functions);
- :mod:`nodes.route.entry`: ``route``, ``route_request``, ``rank_experts``, ``route_to_expert``.
"""
