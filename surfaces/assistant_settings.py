"""The settings an assistant may be made with: its workflow's, every other key named and refused.

``langgraph dev`` and Aegra store an assistant's ``config`` and ``context`` as sent and a run ignores what its
workflow does not read, so a misspelt setting (``chunksize``) would be kept and silently do nothing. An assistant
created or updated with a key its workflow's context does not have is refused (400) with the keys named: on
``langgraph dev`` by its guard (:class:`surfaces.studio.StudioGuard`, which refuses the operator's settings too),
on Aegra by :class:`AssistantGuard`, ahead of Aegra's own refusal of any assistant a tenant makes (403: its
assistants are the operator's). An update that names no graph is held to the keys some workflow reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import fields
from typing import Any, get_type_hints

from langchain_core.runnables import RunnableConfig
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from stores.errors import InputError
from surfaces.access import max_request_bytes, read_body, replay_body
from surfaces.registry import ALIASES, WORKFLOWS, canonical, context_schema

ASSISTANT_PATH = re.compile(r"^/assistants(?:/(?!search/?$|count/?$)[^/]+)?/?$")
"""Where an assistant is created (``POST /assistants``) or updated (``PATCH /assistants/{id}``)."""

CONFIG_KEYS = frozenset(get_type_hints(RunnableConfig))
"""The keys of a ``config`` (LangChain's ``RunnableConfig``)."""

RUN_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns"})
"""``configurable`` keys the server itself reads, whatever the workflow."""

Allowed = Callable[[str], frozenset[str]]
"""The setting keys workflow ``name`` takes."""


def context_fields(workflow: str) -> frozenset[str]:
    """The fields of ``workflow``'s context (its former id too): every setting it reads."""
    schema = context_schema(workflow)
    return frozenset(f.name for f in fields(schema)) if schema is not None else frozenset()


def check_assistant(body: Any, allowed: Allowed) -> None:
    """InputError naming the ``config`` and ``context`` keys of assistant request ``body`` its workflow does not take.

    ``allowed`` gives the keys a workflow takes; a body naming no graph (an update) is held to those of every
    workflow, one naming a graph that is not one of them is left to the server (which refuses it).
    """
    if not isinstance(body, dict):
        return
    graph = body.get("graph_id")
    if graph is not None and str(graph) not in {*WORKFLOWS, *ALIASES}:
        return
    names = [canonical(str(graph))] if graph is not None else list(WORKFLOWS)
    known = frozenset().union(*(allowed(name) for name in names)) | RUN_KEYS
    config = body.get("config")
    config = config if isinstance(config, dict) else {}
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise InputError(
            f"config does not take {', '.join(map(repr, unknown))}; its keys: {', '.join(sorted(CONFIG_KEYS))}"
        )
    whose = names[0] if graph is not None else "no workflow"
    for where, given in (("context", body.get("context")), ("config.configurable", config.get("configurable"))):
        unknown = sorted(set(given) - known) if isinstance(given, dict) else []
        if unknown:
            raise InputError(
                f"{whose} does not take {where} keys {', '.join(map(repr, unknown))} (an assistant keeps only the "
                "settings its workflow reads; its config schema lists them)"
            )


class AssistantGuard:
    """Aegra's door for assistants: a create or update with a key its workflow does not read is a 400.

    Runs inside :class:`deploy.app.TenantGuard`, which has checked the key and the body (size, JSON) already.
    """

    def __init__(self, app: ASGIApp, allowed: Allowed = context_fields) -> None:
        """Guard ``app``, holding assistants to the keys ``allowed`` gives each workflow."""
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an assistant's create or update as the class describes, then pass it on."""
        if (
            scope["type"] != "http"
            or scope["method"] not in ("POST", "PATCH")
            or not ASSISTANT_PATH.match(scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        raw = await read_body(receive, max_request_bytes()) or b""
        try:
            check_assistant(json.loads(raw or b"{}"), self.allowed)
        except InputError as exc:
            await JSONResponse({"error": "refused", "message": str(exc)}, status_code=400)(scope, receive, send)
            return
        except ValueError:
            pass  # not JSON: the server answers it
        await self.app(scope, replay_body(raw, receive), send)
