"""The built-in assistants of the scale-out deployment: the five graphs, by graph name or by Aegra's id."""

from __future__ import annotations

from uuid import UUID, uuid5

ASSISTANT_NAMESPACE = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""Aegra's namespace for the default assistants' ids (``uuid5(namespace, graph_id)``)."""

GRAPHS = ("ingest", "chain", "summarize", "offload", "route")
"""The graphs served, one built-in assistant each."""


def workflow_of(assistant_id: str) -> str | None:
    """The graph a built-in assistant runs (given by graph name or by Aegra's id), else None."""
    if assistant_id in GRAPHS:
        return assistant_id
    return next((g for g in GRAPHS if str(uuid5(ASSISTANT_NAMESPACE, g)) == assistant_id), None)
