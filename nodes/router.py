"""Former home of the router; it lives in :mod:`nodes.routing` now (see that package's docstring).

Kept only so that the README's example and ``notebooks/route.ipynb`` (``from nodes.router import ...``)
still work; code imports from the ``nodes.routing`` modules.
"""

from __future__ import annotations

from nodes.routing.entry import rank_experts, route, route_request, route_to_expert
from nodes.routing.fusion import RouteSettings
from nodes.routing.manifest import register
from nodes.routing.mcp import builtin_registry, load_registry

__all__ = [
    "RouteSettings",
    "builtin_registry",
    "load_registry",
    "rank_experts",
    "register",
    "route",
    "route_request",
    "route_to_expert",
]
