"""The route workflow (Agent-as-a-Graph): register a registry of agents and tools, then route requests.

    register -> route

- :mod:`graphs.route.graph`: the settings, the input, output and state schemas, ``builder`` and ``graph``.

The router itself (retrieval, type-weighted rank fusion, the walk to the top agents) is :mod:`nodes.route`.
"""
