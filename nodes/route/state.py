"""Input, output and state of the route workflow."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from typing_extensions import TypedDict

from nodes.context import NAME, Namespace, described
from stores.questions import MAX_QUESTION_CHARS


class RouteInput(TypedDict):
    """What to route, and over which registry."""

    request: NotRequired[
        Annotated[
            str,
            described(
                "What the user wants done, in plain words: the agents and tools that fit it are returned.",
                example="plot monthly sales from an Excel file",
                minLength=1,
                maxLength=MAX_QUESTION_CHARS,
            ),
        ]
    ]
    requests: NotRequired[
        Annotated[
            list[str],
            described(
                "Several requests to route in one batch, instead of request.",
                example=["translate a PDF into Spanish", "post a message to a Slack channel"],
                minItems=1,
            ),
        ]
    ]
    registry: NotRequired[
        Annotated[
            str,
            described(
                "Registry to route over: 'longdoc' (this server's own workflows), one registered earlier in the "
                "namespace, or the name to register registry_data under.",
                example="longdoc",
                pattern=NAME,
            ),
        ]
    ]
    registry_path: NotRequired[
        Annotated[
            str,
            described(
                "A JSON file of agents and tools (MCP servers format) on the server, under LONGDOC_INGEST_ROOT.",
                example="registries/servers.json",
                maxLength=4096,
            ),
        ]
    ]
    registry_data: NotRequired[
        Annotated[
            Any,
            described(
                "The registry's JSON inline: a list of agents {name, description, tools: [{name, description}]}, "
                "or an object with agents.",
                example=[
                    {
                        "name": "sheets",
                        "description": "Spreadsheets",
                        "tools": [{"name": "plot", "description": "Plot a column"}],
                    }
                ],
            ),
        ]
    ]
    k: NotRequired[
        Annotated[int, described("How many agents to return (default 5).", example=5, minimum=1, maximum=100)]
    ]
    profile: NotRequired[
        Annotated[str, described("Weight profile of agents against tools (default: the server's).", example="default")]
    ]
    retrieval: NotRequired[
        Annotated[
            str,
            described("How candidates are found: vector, hybrid or bm25 (default: the server's).", example="hybrid"),
        ]
    ]
    namespace: NotRequired[Namespace]


class RouteOutput(TypedDict):
    """The routing, and what registration did."""

    agents: list[dict[str, Any]]
    """Top-K agents of a single request: ``{name, score, tools, via}`` (empty for a batch)."""
    tools: list[dict[str, Any]]
    """Top tools of a single request: ``{name, agent, score}`` (empty for a batch)."""
    results: list[dict[str, Any]]
    """One ``{request, agents, tools}`` per request, in input order."""
    registry: NotRequired[str]
    """Name of the registry routed over."""
    registry_hash: str
    """Content hash of that registry."""
    embedded: int
    """How many agent and tool records were embedded by this run (0 when the registry was unchanged)."""
    cached: bool
    """True when the registry was already registered as is."""
    warnings: list[str]
    """Problems found in the registry that were worked around (duplicates kept once, orphan tools left out)."""
    expansion: NotRequired[dict[str, Any]]
    """What writing the tools' examples did (model calls, tokens, entries from the journal), with ``expand``."""
    tasks: NotRequired[list[list[str]]]
    """With ``decompose``: the tasks each request was split into (itself alone when it asks for one thing)."""


class RouteState(RouteInput, RouteOutput, total=False):
    """Private state of the routing graph."""
