"""``longdoc route``: pick the right agent and tool for a request (Agent-as-a-Graph)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nodes.route.context import RouteContext
from nodes.route.model import BUILTIN_REGISTRY
from surfaces.cli import EXIT_OK, add_common, print_json, progress, run_graph
from surfaces.options import context_option, context_values


def _print_result(result: dict[str, Any], show_request: bool) -> None:
    if show_request:
        print(f"\n{result['request']}")
    width = max((len(a["name"]) for a in result["agents"]), default=0)
    for i, agent in enumerate(result["agents"], start=1):
        evidence = f"  tools: {', '.join(agent['tools'])}" if agent["tools"] else ""
        print(f"{i:>2}. {agent['name']:<{width}}  {agent['score']:.4f}{evidence}")
    if result["tools"]:
        print("    top tools: " + ", ".join(f"{t['name']} ({t['agent']})" for t in result["tools"]))


def _route_input(args: argparse.Namespace) -> dict[str, Any]:
    """The route graph's input for the command line ``args``: requests, registry, profile and retrieval."""
    graph_input: dict[str, Any] = {} if args.k is None else {"k": args.k}
    if len(args.request) == 1:
        graph_input["request"] = args.request[0]
    else:
        graph_input["requests"] = list(args.request)
    source = args.registry or BUILTIN_REGISTRY
    if Path(source).is_file() or source.endswith(".json"):
        graph_input["registry_path"] = source
        if args.name:
            graph_input["registry"] = args.name
    else:
        graph_input["registry"] = source
    if args.profile:
        graph_input["profile"] = args.profile
    if args.retrieval:
        graph_input["retrieval"] = args.retrieval
    return graph_input


def _cmd_route(args: argparse.Namespace) -> int:
    from graphs.route.graph import graph

    graph_input = _route_input(args)
    context = context_values(args, RouteContext)
    with progress(args.quiet, "route") as handle:
        out = run_graph(graph, graph_input, context=context, on_event=handle)
    for warning in out.get("warnings") or []:
        print(f"longdoc: registry warning: {warning}", file=sys.stderr)
    if args.json:
        extra = {key: out[key] for key in ("tasks", "expansion") if out.get(key)}
        if "request" in graph_input:
            print_json({"agents": out["agents"], "tools": out["tools"], **extra})
        else:
            print_json({"results": out["results"], **extra})
        return EXIT_OK
    state = "already registered" if out.get("cached") else f"{out.get('embedded', 0)} records embedded"
    print(f"registry {out['registry']} ({state})")
    if out.get("expansion"):
        x = out["expansion"]
        print(
            f"examples: {x['tools_written']} tools written by the model ({x['calls']} calls), "
            f"{x['tools_cached']} from the journal" + (f"; {len(x['failed'])} batches failed" if x["failed"] else "")
        )
    asked = graph_input.get("requests") or [graph_input.get("request")]
    for request, tasks in zip(asked, out.get("tasks") or [[r] for r in asked], strict=True):
        if tasks != [request]:
            print(f"tasks of {request!r}: " + " | ".join(tasks))
    for result in out["results"]:
        _print_result(result, show_request=len(out["results"]) > 1)
    return EXIT_OK


def register(subparsers: Any) -> None:
    """Add the ``route`` command."""
    p = subparsers.add_parser(
        "route",
        help="pick the right agent and tool for a request among hundreds (Agent-as-a-Graph)",
        description="Rank the agents (and their tools) of a registry for one or more requests: vector search "
        "over agents and tools, type-weighted reciprocal rank fusion, then a walk from tools to their "
        "owner agents. The registry is embedded once; an unchanged registry is never embedded again.",
    )
    p.add_argument("request", nargs="+", help="the request to route (several for a batch)")
    p.add_argument(
        "--registry",
        default=None,
        help="registry JSON file (MCP servers format: [{name, description, tools: [{name, description, "
        f"input_schema}}]}}]) or the name of a registered one (default: the built-in '{BUILTIN_REGISTRY}')",
    )
    p.add_argument("--name", default=None, help="name to register the registry file under (default: from the file)")
    for name in ("k", "profile", "retrieval", "rrf_k", "aggregate", "fusion", "index", "expand", "decompose"):
        context_option(p, RouteContext, name)
    context_option(p, RouteContext, "top_tools", "--tools")
    add_common(p, context=RouteContext)
    p.set_defaults(func=_cmd_route)
