"""The chat workflow as an A2A agent (``/a2a/{assistant}``), on the scale-out deployment and on ``langgraph dev``.

Aegra 0.6 has no A2A route; ``langgraph dev`` has one whose streamed events the official A2A SDK
never completes, so :mod:`deploy.dev` mounts this one there in its place. It speaks the JSON-RPC 2.0
binding of A2A 1.0:

- ``SendMessage``: a message of ``text`` parts (the turn's words), ``file`` parts (a document given
  in the chat: its bytes, ``raw`` in base64 with ``mediaType`` and ``filename``) and ``data`` parts
  (input fields, e.g. ``doc_id``); ``contextId`` names the conversation (a thread), absent on the
  first message. The answer comes back as a completed task whose artifact holds the AI message's
  text (the answer and the sources it cites) and, beside it, a data part with the turn's ``sources``,
  ``citations``, ``turn`` and ``doc_id``. A turn that needs what the user can send (a first message
  naming no document) ends as input-required, what to attach or name its status message; a message
  that cannot be taken as it is (an unknown document id, an unreadable file) or a refused run is a
  rejected task, and a failed run a failed task, each with the reason as its status message
  (:func:`outcome`).
- ``SendStreamingMessage`` (what the SDK's client sends by default, since the card says it streams):
  the same turn as server-sent events: the task, then the answer's words as artifact updates as the
  model writes them, then the last chunk (``lastChunk``: the rest of the text and the data part) and
  the task's final status (the answer is not repeated in it).

The agent card, at ``/a2a/{assistant}/.well-known/agent-card.json`` and for the chat at the server's root
(``/.well-known/agent-card.json``), says what the agent does, that it needs a document, and gives
examples. ``{assistant}`` is the workflow's name (``chat``, or its former id
``offload``) or the id of an assistant of the chat graph (Aegra's, or one made on ``langgraph dev``).

Like :mod:`deploy.mcp`, a message is a run made through this instance's own loopback address with
the caller's key, so the guard and Aegra's per-tenant threads apply to it unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Scope

from deploy.mcp import RUN_TIMEOUT, Failed, Refused, own_url, reason, run_failed, run_workflow
from stores.files import IngestRoot
from stores.status import is_status
from surfaces.access import presented_key
from surfaces.registry import ALIASES, CHAT_EXAMPLES, COLLECTION_EXAMPLES, DESCRIPTIONS, WORKFLOWS, canonical

CONVERSATIONAL = ("chat",)
"""The workflows that take a turn as a message (their input has ``messages``)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

MEDIA_TYPES = (
    "text/plain",
    "text/markdown",
    "text/html",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/json",
)
"""What a message may carry: words, documents, and input fields as JSON."""

router = APIRouter()


async def conversational(scope: Scope, headers: dict[str, str], assistant: str) -> str | None:
    """The workflow ``assistant`` runs (by name, former id or assistant id) when it takes turns as messages."""
    from langgraph_sdk import get_client

    if assistant in WORKFLOWS or assistant in ALIASES:
        workflow = canonical(assistant)
    else:
        client = get_client(url=own_url(scope), api_key=presented_key(headers) or None, timeout=30)
        try:
            found = await client.assistants.get(assistant)
            workflow = canonical(str(found.get("graph_id")))
        except (httpx.HTTPError, KeyError):
            return None
    return workflow if workflow in CONVERSATIONAL else None


def _error(request_id: Any, code: int, message: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def file_block(part: dict[str, Any]) -> dict[str, Any]:
    """A file part (A2A 1.0 ``raw``/``url``, or 0.3's ``file`` object) as a LangChain file content block."""
    legacy = part.get("file")
    if isinstance(legacy, dict):
        raw, url = legacy.get("bytes"), legacy.get("uri")
        media, name = legacy.get("mimeType"), legacy.get("name")
    else:
        raw, url, media, name = part.get("raw"), part.get("url"), part.get("mediaType"), part.get("filename")
    if url and not raw:
        raise ValueError("a file is not fetched from a URL: send its bytes (raw, in base64) with its filename")
    if not isinstance(raw, str) or not raw:
        raise ValueError("a file part must hold the file's bytes (raw, in base64)")
    block: dict[str, Any] = {"type": "file", "base64": raw}
    if media:
        block["mime_type"] = str(media)
    if name:
        block["extras"] = {"filename": str(name)}
    return block


def turn_input(parts: list[Any]) -> dict[str, Any]:
    """A message's parts as the workflow's input: text and file parts one human message, data parts input fields."""
    texts: list[str] = []
    files: list[dict[str, Any]] = []
    data: dict[str, Any] = {}
    for part in parts:
        kinds = [key for key in ("text", "data", "raw", "url", "file") if isinstance(part, dict) and key in part]
        if len(kinds) != 1:
            raise ValueError("each part must hold exactly one of text, file (raw or url) or data")
        if "text" in part:
            texts.append(str(part["text"]))
        elif "data" in part:
            if not isinstance(part["data"], dict):
                raise ValueError("a data part must hold a JSON object")
            data.update(part["data"])
        else:
            files.append(file_block(part))
    if not texts and not files:
        raise ValueError("the message has no text or file part")
    text = "\n".join(texts)
    content: Any = [*([{"type": "text", "text": text}] if text else []), *files] if files else text
    return {**data, "messages": [{"type": "human", "content": content}]}


COMPLETED, INPUT_REQUIRED, REJECTED = "TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED"

TURN_DATA = ("turn", "asked", "doc_id", "documents", "citations", "sources")
"""What the answer's data part holds, from the AI message's ``additional_kwargs["longdoc"]``."""


def _message(text: str, thread: str, task: str) -> dict[str, Any]:
    return {
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
        "messageId": str(uuid.uuid4()),
        "contextId": thread,
        "taskId": task,
    }


def answer_parts(text: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """An answer's artifact parts: its text, and beside it the turn's sources and citations as a data part."""
    return [*([{"text": text}] if text or not data else []), *([{"data": data}] if data else [])]


def _task(
    task_id: str, thread: str, state: str, text: str, data: dict[str, Any] | None = None, artifact_id: str = ""
) -> dict[str, Any]:
    """A task in ``state``: a completed one holds the answer as its artifact, any other ``text`` as its status."""
    task: dict[str, Any] = {"id": task_id, "contextId": thread, "status": {"state": state}}
    if state == COMPLETED:
        parts = answer_parts(text, data or {})
        task["artifacts"] = [{"artifactId": artifact_id or str(uuid.uuid4()), "name": "answer", "parts": parts}]
    elif text:
        task["status"]["message"] = _message(text, thread, task_id)
    return task


def _last(output: Any) -> dict[str, Any]:
    messages = output.get("messages") if isinstance(output, dict) else None
    last = messages[-1] if messages else {}
    return last if isinstance(last, dict) else {}


def outcome(output: Any) -> tuple[str, str, dict[str, Any]]:
    """How a turn ends: its task state, its text and the answer's data.

    A turn the chat answered with what to send instead ends as input-required, that text its status (no
    document named: the user can attach or name one); a message it could not take as it is (an unknown id,
    an unreadable file) as rejected, the reason its status; an answer as completed, with its data
    (:data:`TURN_DATA`).
    """
    last = _last(output)
    meta = (last.get("additional_kwargs") or {}).get("longdoc") or {}
    text = str(last.get("content") or "")
    if meta.get("refused"):
        if meta.get("needs"):
            return INPUT_REQUIRED, text, {}
        return REJECTED, IngestRoot.from_env().scrub(str(meta["refused"])), {}
    return COMPLETED, text, {key: meta[key] for key in TURN_DATA if key in meta}


async def send_message(request: Request, assistant: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one turn: the task it ends as."""
    message = params.get("message") or {}
    value = turn_input(list(message.get("parts") or []))
    headers = {k.lower(): v for k, v in request.headers.items()}
    thread = str(message.get("contextId") or "")
    try:
        thread, run_id, output = await run_workflow(request.scope, headers, assistant, value, thread)
    except Refused as exc:
        return _task(str(message.get("taskId") or uuid.uuid4()), exc.thread, REJECTED, str(exc))
    except Failed as exc:
        return _task(exc.run_id, exc.thread, "TASK_STATE_FAILED", f"the turn failed: {exc}")
    state, text, data = outcome(output)
    return _task(run_id, thread, state, text, data)


def _answer_chunk(chunk: dict[str, Any]) -> bool:
    """A streamed piece of the answer, not of a step's status message (:func:`stores.status.show_status`)."""
    return chunk.get("type") == "AIMessageChunk" and not is_status(chunk.get("id"))


async def stream_turn(
    scope: Scope, headers: dict[str, str], assistant: str, value: dict[str, Any], thread: str
) -> AsyncIterator[tuple[str, Any]]:
    """One turn as it runs: its start, its words as the answer is written, then its output.

    Yields ``("started", (thread, run id))``, ``("words", text)`` as the answer is written, then
    ``("done", output)``; raises :class:`~deploy.mcp.Refused` or :class:`~deploy.mcp.Failed`.
    """
    from langgraph_sdk import get_client

    client = get_client(url=own_url(scope), api_key=presented_key(headers) or None, timeout=RUN_TIMEOUT)
    run_id, output = "", None
    try:
        if not thread:
            thread = (await client.threads.create())["thread_id"]
        async for part in client.runs.stream(thread, assistant, input=value, stream_mode=["messages-tuple", "values"]):
            if part.event == "metadata" and not run_id:
                run_id = str(part.data.get("run_id") or "")
                yield "started", (thread, run_id)
            elif part.event == "messages" and part.data and _answer_chunk(part.data[0]):
                yield "words", str(part.data[0].get("content") or "")
            elif part.event == "values":
                output = part.data
            elif part.event == "error":
                raise run_failed(part.data, thread, run_id)
    except httpx.HTTPStatusError as exc:
        raise Refused(exc.response.status_code, reason(exc.response), thread) from None
    yield "done", output


def _sse(request_id: Any, result: dict[str, Any]) -> bytes:
    return f"data: {json.dumps({'jsonrpc': '2.0', 'id': request_id, 'result': result})}\n\n".encode()


async def stream_message(request: Request, assistant: str, params: dict[str, Any], request_id: Any) -> Response:
    """``SendStreamingMessage``: the turn as server-sent events, ending with the task's final status."""
    message = params.get("message") or {}
    value = turn_input(list(message.get("parts") or []))
    headers = {k.lower(): v for k, v in request.headers.items()}

    async def events() -> AsyncIterator[bytes]:
        thread, task_id, artifact_id, shown = str(message.get("contextId") or ""), "", str(uuid.uuid4()), ""

        def status(state: str, text: str = "") -> bytes:
            update: dict[str, Any] = {"taskId": task_id, "contextId": thread, "status": {"state": state}}
            if text:
                update["status"]["message"] = _message(text, thread, task_id)
            return _sse(request_id, {"statusUpdate": update})

        def words(parts: list[dict[str, Any]], last: bool) -> bytes:
            artifact = {"artifactId": artifact_id, "name": "answer", "parts": parts}
            update = {"taskId": task_id, "contextId": thread, "artifact": artifact, "append": bool(shown)}
            return _sse(request_id, {"artifactUpdate": {**update, "lastChunk": last}})

        try:
            async for kind, data in stream_turn(request.scope, headers, assistant, value, thread):
                if kind == "started":
                    thread, task_id = data
                    yield _sse(request_id, {"task": _task(task_id, thread, "TASK_STATE_SUBMITTED", "")})
                    yield status("TASK_STATE_WORKING")
                elif kind == "words" and data:
                    yield words([{"text": data}], last=False)
                    shown += data
                elif kind == "done":
                    state, text, turn = outcome(data)
                    if state != COMPLETED:
                        yield status(state, text)
                        continue
                    rest = text[len(shown) :] if text.startswith(shown) else text
                    yield words(answer_parts(rest, turn), last=True)
                    yield status(COMPLETED)
        except Refused as exc:
            task_id = task_id or str(message.get("taskId") or uuid.uuid4())
            thread = thread or exc.thread
            yield _sse(request_id, {"task": _task(task_id, thread, REJECTED, str(exc))})
        except Failed as exc:
            thread, task_id = exc.thread, task_id or exc.run_id
            yield status("TASK_STATE_FAILED", f"the turn failed: {exc}")

    return StreamingResponse(events(), media_type="text/event-stream")


@router.post("/a2a/{assistant}")
async def a2a(assistant: str, request: Request) -> Response:
    """JSON-RPC 2.0: ``SendMessage`` and ``SendStreamingMessage`` to a conversational assistant."""
    try:
        body = await request.json()
    except ValueError:
        return _error(None, PARSE_ERROR, "the request is not JSON")
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or "method" not in body:
        return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 request")
    request_id = body.get("id")
    headers = {k.lower(): v for k, v in request.headers.items()}
    if await conversational(request.scope, headers, assistant) is None:
        return _error(request_id, INVALID_PARAMS, f"{assistant!r} is not a conversational assistant: use chat")
    method, params = body["method"], body.get("params") or {}
    if method not in ("SendMessage", "SendStreamingMessage"):
        return _error(request_id, METHOD_NOT_FOUND, f"method {method!r} is not served; use SendMessage")
    if not isinstance(params, dict):
        return _error(request_id, INVALID_PARAMS, "params must be a JSON object")
    try:
        if method == "SendStreamingMessage":
            return await stream_message(request, assistant, params, request_id)
        task = await send_message(request, assistant, params)
    except ValueError as exc:
        return _error(request_id, INVALID_PARAMS, str(exc))
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"task": task}})


def agent_card(url: str) -> dict[str, Any]:
    """The chat's agent card, served at ``url``: a skill for one document and one for a collection."""
    needs = (
        " It needs a document or several: attach them to the first message (file parts: PDF, DOCX, HTML, Markdown "
        'or text), or name ingested ones with a data part ({"doc_id": ...} for one, {"doc_ids": [...]}, '
        '{"path": "folder"} or {"whole_namespace": true} for a collection); a first message without one ends as '
        "input-required, saying what to attach. Later messages in the same context go on about the same documents."
    )
    modes = {"inputModes": list(MEDIA_TYPES), "outputModes": ["text/plain", "text/markdown", "application/json"]}
    return {
        "name": "chat",
        "description": DESCRIPTIONS["chat"] + needs,
        "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": True, "pushNotifications": False},
        "defaultInputModes": list(MEDIA_TYPES),
        "defaultOutputModes": ["text/plain", "text/markdown", "application/json"],
        "skills": [
            {
                "id": "chat",
                "name": "Chat about a document",
                "description": "Questions and follow-ups about one long document; each answer ends with the "
                "sentences it cites (document, sentence label, quoted words), which also come as a data part "
                "(sources, citations)." + needs,
                "tags": ["documents", "question answering", "long context", "citations"],
                "examples": list(CHAT_EXAMPLES),
                **modes,
            },
            {
                "id": "chat-collection",
                "name": "Chat about several documents",
                "description": "Questions and follow-ups across a collection of documents read as one: the files "
                "attached to the first message, or ingested ones named by a data part: "
                '{"doc_ids": ["<id>", "<id>"]}, {"path": "<folder under the ingest root>"} or '
                '{"whole_namespace": true} (every document of the namespace). Each cited sentence names its '
                "document by a tag ([2:c3.1] is sentence 1 of chunk c3 of document 2), and each of the data part's "
                "sources gives the title of its document.",
                "tags": ["documents", "collections", "question answering", "citations"],
                "examples": list(COLLECTION_EXAMPLES),
                **modes,
            },
        ],
    }


@router.get("/a2a/{assistant}/.well-known/agent-card.json")
@router.get("/a2a/{assistant}/.well-known/agent.json")
async def card(assistant: str, request: Request) -> JSONResponse:
    """The agent card of a conversational assistant."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    if await conversational(request.scope, headers, assistant) is None:
        return JSONResponse({"error": "not found", "message": f"no A2A agent {assistant!r}"}, status_code=404)
    return JSONResponse(agent_card(str(request.base_url).rstrip("/") + f"/a2a/{assistant}"))


@router.get("/.well-known/agent-card.json")
@router.get("/.well-known/agent.json")
async def root_card(request: Request) -> JSONResponse:
    """The chat's agent card at the server's root, where A2A clients look first (``/a2a/chat`` serves it too)."""
    return JSONResponse(agent_card(str(request.base_url).rstrip("/") + "/a2a/chat"))
