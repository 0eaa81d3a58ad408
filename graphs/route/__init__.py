"""The route workflow (Agent-as-a-Graph): register a registry of agents and tools, then route requests.

    register -> route

- :mod:`graphs.route.graph`: ``builder`` and ``graph``, wired as drawn above.

The router (its nodes in :mod:`nodes.route.router`; retrieval, type-weighted rank fusion, the walk to the
top agents) is :mod:`nodes.route`. The settings (``RouteContext``, :mod:`nodes.route.context`) and the input, output and
state schemas (:mod:`nodes.route.state`) sit beside them, and are re-exported here.
"""

from nodes.route.context import RouteContext
from nodes.route.state import RouteInput, RouteOutput, RouteState

__all__ = ["RouteContext", "RouteInput", "RouteOutput", "RouteState"]
