"""Former home of the router; it lives in :mod:`nodes.routing` now (see that package's docstring).

Kept only so that ``from nodes.router import route_request`` (the README's example) still works; code
imports from the ``nodes.routing`` modules.
"""

from __future__ import annotations

from nodes.routing.entry import rank_experts, route, route_request, route_to_expert

__all__ = ["rank_experts", "route", "route_request", "route_to_expert"]
