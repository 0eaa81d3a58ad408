"""The router's nodes: ``register`` (read the registry, embed it once) and ``route`` (retrieve, fuse, walk)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from langgraph.runtime import Runtime

from nodes.context import validate
from nodes.route.context import RouteContext
from nodes.route.entry import check_requests, embed_requests, route
from nodes.route.fusion import RouteSettings
from nodes.route.manifest import register, registered
from nodes.route.mcp import load_registry, parse_registry
from nodes.route.model import check_registry_name
from nodes.route.state import RouteState
from stores.errors import InputError
from stores.vectorstore import get_store


def _requests(state: RouteState) -> list[str]:
    if state.get("request") is not None and state.get("requests") is not None:
        raise InputError("give either request or requests, not both")
    if state.get("requests") is not None:
        return check_requests(state["requests"])
    return check_requests([state.get("request") or ""])


def register_registry(state: RouteState, runtime: Runtime[RouteContext]) -> dict[str, Any]:
    """Validate the requests, read the registry and make sure it is embedded in the store."""
    ctx = runtime.context or RouteContext()
    validate(ctx)
    _requests(state)
    namespace = state.get("namespace") or ctx.namespace
    name = state.get("registry")
    if name is not None:
        check_registry_name(name)
    if state.get("registry_path") and state.get("registry_data") is not None:
        raise InputError("give either registry_path or registry_data, not both")
    if state.get("registry_path"):
        registry = load_registry(state["registry_path"], name)
    elif state.get("registry_data") is not None:
        registry = parse_registry(state["registry_data"], name or "inline")
    else:
        registry = registered(namespace, name or ctx.registry)
    update: dict[str, Any] = {}
    if ctx.expand and (state.get("registry_path") or state.get("registry_data") is not None):
        registry, stats = _expand(registry, namespace, ctx, runtime.stream_writer)
        update["expansion"] = stats.to_dict()
    # An unchanged registry is not checked against the store here: the route node does it after
    # embedding the requests, so a run whose embedder fails leaves the store as it found it.
    store = get_store(namespace, ctx.embedder)
    result = register(registry, store, progress=runtime.stream_writer, check_records=False)
    runtime.stream_writer(
        {"stage": "registry", "message": f"registry {registry.name}: {result.agents} agents, {result.tools} tools"}
    )
    return {
        "namespace": namespace,
        "registry": registry.name,
        "registry_hash": result.content_hash,
        "registry_data": None,
        "embedded": result.embedded,
        "cached": result.cached,
        "warnings": result.warnings,
        **update,
    }


def _expand(registry: Any, namespace: str, ctx: RouteContext, progress: Any) -> tuple[Any, Any]:
    from nodes.route.expansion import expand_registry, journal_for, model_id
    from stores.models import llm_for

    llm = llm_for("router", ctx)
    journal = journal_for(namespace)
    return expand_registry(
        registry, journal, llm, model_id=model_id(llm), progress=progress, system_prompt=ctx.expand_prompt
    )


def route_settings(ctx: RouteContext, profile: str = "", **overrides: Any) -> RouteSettings:
    """The router's settings of a run: each ``RouteSettings`` knob from its context field, then ``overrides``.

    A knob is read from the context field of its name (``evidence`` from ``evidence_tools``); weights left empty
    come from ``profile`` (default: the context's).
    """
    knobs = {f.name for f in fields(RouteSettings)}
    values = {f.name: getattr(ctx, f.name) for f in fields(ctx) if f.name in knobs}
    values["evidence"] = ctx.evidence_tools
    values.update(overrides)
    return RouteSettings.from_profile(profile or ctx.profile, **values)


def route_requests(state: RouteState, runtime: Runtime[RouteContext]) -> dict[str, Any]:
    """Retrieve, fuse and walk for every request."""
    ctx = runtime.context or RouteContext()
    requests = _requests(state)
    registry = registered(state["namespace"], state["registry"])
    if registry.content_hash != state.get("registry_hash"):
        raise InputError(f"registry {registry.name!r} changed while routing; run again")
    settings = route_settings(
        ctx,
        state.get("profile") or "",
        k=ctx.k if state.get("k") is None else state["k"],
        retrieval=state.get("retrieval") or ctx.retrieval,
    )
    store = get_store(state["namespace"], ctx.embedder)
    vectors = embed_requests(requests, store, settings)  # before the store is opened
    update: dict[str, Any] = {}
    checked = register(registry, store)  # records lost since the registered copy was written are embedded again
    if not checked.cached:
        update.update(embedded=(state.get("embedded") or 0) + checked.embedded, cached=False)
    if ctx.decompose:
        routed, update["tasks"] = _decomposed(requests, vectors, registry, store, settings, ctx)
    else:
        routed = route(requests, registry, store, settings, query_vectors=vectors)
    results = [r.to_dict() for r in routed]
    single = len(results) == 1 and state.get("requests") is None
    return {
        "results": results,
        "agents": results[0]["agents"] if single else [],
        "tools": results[0]["tools"] if single else [],
        **update,
    }


def _decomposed(
    requests: list[str],
    vectors: list[list[float]] | None,
    registry: Any,
    store: Any,
    settings: RouteSettings,
    ctx: RouteContext,
) -> tuple[list[Any], list[list[str]]]:
    """Each request routed with its tasks (one router-model call each), the lists fused."""
    from nodes.route.entry import merge_routes
    from nodes.route.expansion import decompose
    from stores.models import llm_for

    llm = llm_for("router", ctx)
    routed, tasks_of = [], []
    for i, request in enumerate(requests):
        tasks = decompose(request, llm, ctx.decompose_prompt)
        tasks = [t for t in tasks if t != request]
        own = None if vectors is None else [vectors[i], *(store.embedder.embed_query(t) for t in tasks)]
        parts = route([request, *tasks], registry, store, settings, query_vectors=own)
        routed.append(merge_routes(request, parts, settings))
        tasks_of.append(tasks or [request])
    return routed, tasks_of
