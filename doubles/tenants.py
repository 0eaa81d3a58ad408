"""Requests of tenants sharing a namespace on the LangServe app (a ``TestClient``), for tests and benchmarks."""

from __future__ import annotations

from typing import Any

SHARED = "shared"
"""The namespace the tenants share."""


def invoke(client: Any, route: str, headers: dict[str, str], value: dict[str, Any], thread: str = "") -> Any:
    """``/<route>/invoke`` of ``value`` in the shared namespace as ``headers``' tenant, on ``thread`` when given."""
    body: dict[str, Any] = {"input": {"namespace": SHARED, **value}}
    if thread:
        body["config"] = {"configurable": {"thread_id": thread}}
    return client.post(f"/{route}/invoke", json=body, headers=headers)
