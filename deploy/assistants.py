"""The built-in assistants of the scale-out deployment: the workflows, by graph id (former or not) or by Aegra's id."""

from __future__ import annotations

from uuid import UUID, uuid5

from surfaces.registry import ALIASES, WORKFLOWS, canonical

ASSISTANT_NAMESPACE = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""Aegra's namespace for the default assistants' ids (``uuid5(namespace, graph_id)``)."""

GRAPHS = (*WORKFLOWS, *ALIASES)
"""The graph ids of ``aegra.json``: the workflows, and their former ids (:data:`surfaces.registry.ALIASES`)."""


def workflow_of(assistant_id: str) -> str | None:
    """The workflow a built-in assistant runs (given by graph id, former or not, or by Aegra's id), else None."""
    graph = next((g for g in GRAPHS if assistant_id in (g, str(uuid5(ASSISTANT_NAMESPACE, g)))), None)
    return None if graph is None else canonical(graph)
