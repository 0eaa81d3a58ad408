"""Registration: embedding a registry into a namespace's store, and the registered copy (manifest).

The manifest makes re-registering an unchanged registry embed nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.route.mcp import builtin_registry, parse_registry, registry_from_agents
from nodes.route.model import (
    BUILTIN_REGISTRY,
    TEXT_FORMAT,
    Agent,
    NodeId,
    Registry,
    check_registry_name,
    example_record_id,
    record_id,
)
from stores.cache import ProcessCache
from stores.errors import InputError
from stores.text import content_hash


@dataclass
class RegisterResult:
    """What registering a registry did."""

    name: str
    content_hash: str
    agents: int
    tools: int
    embedded: int
    deleted: int
    cached: bool
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "registry": self.name,
            "hash": self.content_hash,
            "agents": self.agents,
            "tools": self.tools,
            "embedded": self.embedded,
            "deleted": self.deleted,
            "cached": self.cached,
            "warnings": list(self.warnings),
        }


def _record_plan(registry: Registry) -> list[tuple[str, NodeId, Any]]:
    """``(record_id, node, Record)`` for every agent and tool of ``registry``, and every example of one."""
    from stores.vectorstore import Record

    doc = registry.doc_id
    rows: list[tuple[NodeId, str, str, str, str, str, int | None]]
    rows = [(a.node, a.text, a.name, a.category, a.name, "", None) for a in registry.agents]
    rows += [(t.node, t.text, t.name, registry.agent(t.agent).category, t.agent, t.name, None) for t in registry.tools]
    for entry in registry.entries:
        agent, tool = (entry.name, "") if entry.node[0] == "agent" else (entry.node[1], entry.name)
        section = registry.agent(agent).category
        rows += [(entry.node, text, entry.name, section, agent, tool, i) for i, text in enumerate(entry.examples)]
    plan = []
    position = {"agent": 0, "tool": 0}
    for node, text, name, section, agent, tool, example in rows:
        rid = record_id(doc, node) if example is None else example_record_id(doc, node, example)
        kind = node[0]
        extra: dict[str, Any] = {"agent": agent, "tool": tool, "hash": content_hash(TEXT_FORMAT + rid + text)}
        if example is not None:
            extra["example"] = example
        rec = Record(
            id=rid,
            text=text,
            kind=kind,
            doc_id=doc,
            chunk_id=name,
            position=position[kind],
            section=section,
            extra=extra,
        )
        position[kind] += 1
        plan.append((rid, node, rec))
    return plan


def manifest_path(namespace: str, name: str) -> Path:
    """Where the registered copy of registry ``name`` of ``namespace`` is kept."""
    from stores.documents import namespace_dir

    return namespace_dir(namespace) / "registries" / f"{check_registry_name(name)}.json"


def _read_manifest(namespace: str, name: str) -> dict[str, Any] | None:
    text = _manifest_text(namespace, name)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"the registered copy of registry {name!r} is damaged: {exc}") from exc
    return data if isinstance(data, dict) else None


def _manifest_text(namespace: str, name: str) -> str | None:
    """The registered copy's JSON: in the Chroma server when one is set (every instance sees it), else a file."""
    from stores.shared_files import shared_files

    shared = shared_files(namespace)
    if shared is not None:
        return shared.get("registries", f"{check_registry_name(name)}.json")
    path = manifest_path(namespace, name)
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"the registered copy of registry {name!r} is damaged ({path}): {exc}") from exc


def _write_manifest(namespace: str, name: str, text: str) -> None:
    from stores.documents import write_atomic
    from stores.shared_files import shared_files

    shared = shared_files(namespace)
    if shared is not None:
        shared.put("registries", f"{check_registry_name(name)}.json", text)
    else:
        write_atomic(manifest_path(namespace, name), text)


_register_lock = threading.Lock()


def register(
    registry: Registry,
    store: Any,
    *,
    embed: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    batch_size: int = 32,
    check_records: bool = True,
) -> RegisterResult:
    """Embed ``registry`` into ``store`` (namespace and vector space of the store) and record it.

    Idempotent: when the registered copy has the same content hash for this vector space and the
    store holds the expected number of records, nothing is read or embedded. Otherwise only records
    whose own hash changed are embedded, and records no longer in the registry are deleted.
    ``embed`` replaces the store's embedder (benchmarks pass a cached one). With ``check_records``
    false, an unchanged registered copy is taken at its word and the store is not opened (the route
    graph checks the records once its requests are embedded, so a failing embedder touches nothing).
    """
    namespace = store.namespace
    plan = _record_plan(registry)
    total = len(plan)
    digest = registry.content_hash
    with _register_lock:
        manifest = _read_manifest(namespace, registry.name) or {}
        spaces = dict(manifest.get("spaces") or {})
        if spaces.get(store.space) == digest and (not check_records or store.count(doc_id=registry.doc_id) == total):
            return RegisterResult(
                registry.name, digest, len(registry.agents), len(registry.tools), 0, 0, True, list(registry.warnings)
            )
        existing = store.collection.get(where={"doc_id": registry.doc_id}, include=["metadatas"])
        have = {rid: (meta or {}).get("hash") for rid, meta in zip(existing["ids"], existing["metadatas"], strict=True)}
        todo = [rec for rid, _node, rec in plan if have.get(rid) != rec.extra["hash"]]
        stale = sorted(set(have) - {rid for rid, _n, _r in plan})
        if stale:
            store.delete(stale)
        embed_fn = embed or store.embedder.embed_documents
        done = 0
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            vectors = embed_fn([r.text for r in batch])
            store.add(batch, embeddings=vectors)
            done += len(batch)
            if progress is not None:
                progress({"stage": "embed registry", "done": done, "total": len(todo)})
        if manifest.get("hash") != digest:
            spaces = {space: h for space, h in spaces.items() if h == digest}
        spaces[store.space] = digest
        _write_manifest(
            namespace,
            registry.name,
            json.dumps({"name": registry.name, "hash": digest, "spaces": spaces, **registry.to_json()}),
        )
        _registered.pop((namespace, registry.name))
    return RegisterResult(
        registry.name, digest, len(registry.agents), len(registry.tools), len(todo), len(stale), False,
        list(registry.warnings),
    )  # fmt: skip


_registered: ProcessCache[tuple[str, str], tuple[str, Registry]] = ProcessCache("registered registries", 64)
"""Each (namespace, name)'s registry, with the version of its manifest it was read from."""


def registered(namespace: str, name: str) -> Registry:
    """Registry ``name`` as last registered in ``namespace`` (``longdoc`` is built in)."""
    from stores.shared_files import shared_files

    if shared_files(namespace) is None:
        path = manifest_path(namespace, name)
        version = str(path.stat().st_mtime_ns) if path.is_file() else None  # no re-read while unchanged
        text = None
    else:
        text = _manifest_text(namespace, name)
        version = content_hash(text) if text is not None else None
    if version is None:
        if name == BUILTIN_REGISTRY:
            return builtin_registry()
        raise InputError(f"no registry named {name!r} in namespace {namespace!r}; give a registry file first")
    cached = _registered.get((namespace, name))
    if cached is not None and cached[0] == version:
        return cached[1]
    text = text if text is not None else _manifest_text(namespace, name)
    try:
        data = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise InputError(f"the registered copy of registry {name!r} is damaged: {exc}") from exc
    registry = parse_registry((data if isinstance(data, dict) else {}).get("agents") or [], name)
    _registered.put((namespace, name), (version, registry))
    return registry


def register_agents(
    namespace: str,
    registry_name: str,
    agents: Mapping[str, str] | Iterable[Agent],
    *,
    embedder: str | None = None,
    replace_all: bool = False,
) -> RegisterResult:
    """Add (or update) agents in registered registry ``registry_name``; only the changed ones are embedded.

    This is how the product's own agents register themselves: ``{name: description}`` for tool-less
    agents, or ``Agent`` objects with their tools. With ``replace_all`` the registry becomes exactly
    these agents.
    """
    from stores.vectorstore import get_store

    new = registry_from_agents(registry_name, agents)
    if not replace_all:
        try:
            old = registered(namespace, registry_name)
        except InputError:
            old = None
        if old is not None:
            names = {a.name for a in new.agents}
            merged = [a for a in old.agents if a.name not in names] + list(new.agents)
            new = Registry(name=registry_name, agents=tuple(merged), warnings=new.warnings)
    return register(new, get_store(namespace, embedder))
