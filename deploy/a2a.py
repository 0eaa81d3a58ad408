"""The chat workflow as an A2A agent on the scale-out deployment (``/a2a/{assistant}``), behind the tenant guard.

Aegra 0.6 has no A2A route; this one speaks the JSON-RPC 2.0 binding of A2A as ``langgraph dev``
does: ``SendMessage`` with a message of ``text`` parts (the turn, a human message) and ``data``
parts (input fields, e.g. ``doc_id`` on the first turn); ``contextId`` names the conversation (a
thread), absent on the first message. The answer comes back as a completed task whose artifact
holds the AI message's text; a refused or failed run is a failed task with the reason. The agent
card is at ``/a2a/{assistant}/.well-known/agent-card.json``.

Like :mod:`deploy.mcp`, a message is a run made through this instance's own loopback address with
the caller's key, so the guard and Aegra's per-tenant threads apply to it unchanged.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from deploy.assistants import workflow_of
from deploy.mcp import RUN_TIMEOUT, own_url, reason
from surfaces.access import presented_key

CONVERSATIONAL = ("offload",)
"""The workflows that take a turn as a message (their input has ``messages``)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

router = APIRouter()


def _workflow(assistant: str) -> str | None:
    found = workflow_of(assistant)
    return found if found in CONVERSATIONAL else None


def _error(request_id: Any, code: int, message: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def turn_input(parts: list[Any]) -> dict[str, Any]:
    """A message's parts as the workflow's input: text parts one human message, data parts input fields."""
    texts, data = [], {}
    for part in parts:
        if not isinstance(part, dict) or sum(key in part for key in ("text", "data")) != 1:
            raise ValueError("each part must hold exactly one of text or data (file parts are not taken)")
        if "text" in part:
            texts.append(str(part["text"]))
        elif isinstance(part["data"], dict):
            data.update(part["data"])
        else:
            raise ValueError("a data part must hold a JSON object")
    if not texts:
        raise ValueError("the message has no text part")
    return {**data, "messages": [{"type": "human", "content": "\n".join(texts)}]}


def _task(run_id: str, thread: str, state: str, text: str) -> dict[str, Any]:
    message = {"role": "ROLE_AGENT", "parts": [{"text": text}], "messageId": str(uuid.uuid4())}
    task: dict[str, Any] = {"id": run_id, "contextId": thread, "status": {"state": state}}
    if state == "TASK_STATE_COMPLETED":
        task["artifacts"] = [{"artifactId": str(uuid.uuid4()), "name": "answer", "parts": message["parts"]}]
    else:
        task["status"]["message"] = {**message, "contextId": thread, "taskId": run_id}
    return task


async def send_message(request: Request, workflow: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one turn of ``workflow``: the task it ends as."""
    from langgraph_sdk import get_client

    message = params.get("message") or {}
    value = turn_input(list(message.get("parts") or []))
    headers = {k.lower(): v for k, v in request.headers.items()}
    client = get_client(url=own_url(request.scope), api_key=presented_key(headers), timeout=RUN_TIMEOUT)
    thread = str(message.get("contextId") or "")
    try:
        if not thread:
            thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, workflow, input=value)
        output = await client.runs.join(thread, run["run_id"])
        done = await client.runs.get(thread, run["run_id"])
    except httpx.HTTPStatusError as exc:
        text = f"refused ({exc.response.status_code}): {reason(exc.response)}"
        return _task(str(message.get("taskId") or uuid.uuid4()), thread, "TASK_STATE_REJECTED", text)
    if done.get("status") != "success":
        text = f"{workflow} failed: {done.get('error_message') or done.get('status')}"
        return _task(run["run_id"], thread, "TASK_STATE_FAILED", text)
    answer = (output.get("messages") or [{}])[-1] if isinstance(output, dict) else {}
    return _task(run["run_id"], thread, "TASK_STATE_COMPLETED", str(answer.get("content") or ""))


@router.post("/a2a/{assistant}")
async def a2a(assistant: str, request: Request) -> JSONResponse:
    """JSON-RPC 2.0: ``SendMessage`` to a conversational assistant."""
    try:
        body = await request.json()
    except ValueError:
        return _error(None, PARSE_ERROR, "the request is not JSON")
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or "method" not in body:
        return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 request")
    request_id = body.get("id")
    workflow = _workflow(assistant)
    if workflow is None:
        return _error(request_id, INVALID_PARAMS, f"{assistant!r} is not a conversational assistant: use offload")
    if body["method"] != "SendMessage":
        return _error(request_id, METHOD_NOT_FOUND, f"method {body['method']!r} is not served; use SendMessage")
    try:
        task = await send_message(request, workflow, dict(body.get("params") or {}))
    except ValueError as exc:
        return _error(request_id, INVALID_PARAMS, str(exc))
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"task": task}})


@router.get("/a2a/{assistant}/.well-known/agent-card.json")
async def agent_card(assistant: str, request: Request) -> JSONResponse:
    """The agent card of a conversational assistant."""
    if _workflow(assistant) is None:
        return JSONResponse({"error": "not found", "message": f"no A2A agent {assistant!r}"}, status_code=404)
    return JSONResponse(
        {
            "name": "longdoc chat",
            "description": "Questions about one long document, over many turns, with a small working memory.",
            "version": "1",
            "supportedInterfaces": [{"url": f"/a2a/{assistant}", "protocolBinding": "JSONRPC"}],
            "capabilities": {"streaming": False, "pushNotifications": False},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {
                    "id": "chat",
                    "name": "Chat over a document",
                    "description": "First message: the question, and a data part {doc_id} naming an ingested document.",
                    "tags": ["documents", "question answering"],
                }
            ],
        }
    )
