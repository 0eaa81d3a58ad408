"""Registries and their examples, registered by one instance and routed by another, over both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doubles.chat import ScriptedChatModel
from graphs.route.graph import graph
from nodes.route.context import RouteContext
from stores.errors import InputError
from stores.models import use_chat_model
from stores.vectorstore import reset_stores
from tests.unit.test_route_expansion import _reply
from tests.unit.test_router import SERVERS
from tests.unit.test_vectorstore import backend, chroma_url  # noqa: F401  (fixtures: local dir and Chroma server)


def test_a_registry_registered_on_one_instance_is_routed_on_another(
    backend: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(SERVERS), encoding="utf-8")
    monkeypatch.setenv("LONGDOC_HOME", str(tmp_path / "first"))
    model = ScriptedChatModel(default=_reply)
    with use_chat_model(model):
        first = graph.invoke(
            {"request": "I need stock_price now", "registry_path": str(path)}, context=RouteContext(k=1, expand=True)
        )
    calls = len(model.calls)
    assert calls == len(SERVERS) and first["expansion"]["tools_written"] == 7
    # A second instance: its own home, the same Chroma server (or, locally, nothing shared).
    monkeypatch.setenv("LONGDOC_HOME", str(tmp_path / "second"))
    reset_stores()
    by_name = {"request": "I need stock_price now", "registry": "servers"}
    if backend == "local":
        with pytest.raises(InputError, match="no registry named"):
            graph.invoke(by_name, context=RouteContext(k=1))
        return
    out = graph.invoke(by_name, context=RouteContext(k=1))
    assert out["cached"] and out["registry_hash"] == first["registry_hash"]
    assert out["agents"][0]["name"] == "Finance Server"
    # Registering the file again with expand there calls no model: the examples are shared too.
    with use_chat_model(model):
        again = graph.invoke(
            {"request": "I need stock_price now", "registry_path": str(path)}, context=RouteContext(k=1, expand=True)
        )
    assert len(model.calls) == calls and again["expansion"]["tools_cached"] == 7 and again["cached"]
