"""The route workflow (Agent-as-a-Graph): register a registry of agents and tools, then route requests.

    register -> route

- :mod:`nodes.route.context`: ``RouteContext`` (the settings); :mod:`nodes.route.state`: the input, output
  and state schemas;
- :mod:`graphs.route.graph`: ``builder`` and ``graph``, wired as drawn above.

The router (its nodes in :mod:`nodes.route.router`; retrieval, type-weighted rank fusion, the walk to the
top agents) is :mod:`nodes.route`.
"""
