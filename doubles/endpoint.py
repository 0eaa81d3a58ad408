"""A scripted OpenAI-compatible chat endpoint for tests of whole servers (no model weights).

``python -m doubles.endpoint --port N`` (or ``--fd N``, a listening socket handed down) serves
``POST /v1/chat/completions`` (and ``/v1/embeddings``: hashed-word vectors, with the same faults): a request
with a JSON-schema ``response_format`` gets the smallest instance of that schema (first enum
value, minimum list lengths, ``c0`` for id-like strings), any other request a short cited
sentence. Token usage is estimated from the text. Point ``LONGDOC_BASE_URL`` at it to run every
graph through a real HTTP model call path in seconds, e.g. under ``langgraph dev``.

It can also misbehave on purpose (``--fault MODE``, or a :class:`Script` in tests), one of
:data:`FAULTS`: ``stall`` (accept, then never answer), ``stall_reply`` (half the reply, then nothing
more), ``truncated`` (JSON cut off with
``finish_reason: length``), ``cut_stop`` (the reply cut half-way yet ``finish_reason: stop``, as a
broken proxy sends it), ``non_json`` (prose where JSON was required), ``error_500``,
``rate_limited`` (429 with ``Retry-After``), ``html`` (a 200 HTML page), ``empty`` (an empty
reply), ``reset`` (the connection dropped half-way through the reply). :func:`running` serves an
app in a thread on a loopback socket bound to a port the system picks (parallel test processes never share
one); :func:`refusing` holds a loopback port that refuses every connection.

It can also play a slow llama.cpp server: ``prompt_seconds`` of prompt reading before the first
token, with a ``prompt_progress`` chunk every ``progress_every`` seconds of it when a streamed
request asks for ``return_progress`` (and ``stream_progress`` is on), and ``slots`` requests served
at a time (the others wait without a byte sent, as llama.cpp queues them). Like llama.cpp it
answers ``GET /health`` and ``GET /slots``, whose ``n_prompt_tokens_processed`` moves every
``progress_every`` seconds of reading, whether or not the stream reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from stores.local_model import free_port as free_port  # tests and benchmarks take it from here too
from stores.local_model import listening_socket
from stores.text import count_tokens

TEXT_REPLY = "The document answers this in its first section [c0]."
PIECE = 12
"""Characters per chunk of a streamed reply (a reply arrives in pieces, as a model writes it)."""


def sample(schema: dict[str, Any], defs: dict[str, Any] | None = None, name: str = "") -> Any:
    """The smallest value that satisfies ``schema`` (a JSON schema, ``$ref`` into ``$defs`` allowed)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return sample(defs[schema["$ref"].split("/")[-1]], defs, name)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return sample(options[0], defs, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {prop: sample(sub, defs, prop) for prop, sub in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [sample(schema.get("items", {"type": "string"}), defs, name) for _ in range(count)]
    return _sample_scalar(schema, kind, name)


def _sample_scalar(schema: dict[str, Any], kind: Any, name: str) -> Any:
    """The smallest value of a scalar ``schema`` of type ``kind``; a string (``c0`` for id-like names) otherwise."""
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        low, high = schema.get("minimum", 0.0), schema.get("maximum", 1.0)
        return round((float(low) + float(high)) / 2, 3)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    lowered = name.lower()
    if any(word in lowered for word in ("id", "citation", "evidence", "chunk", "source", "recall")):
        return "c0"
    text = "The document states this in its first section [c0]."
    if "maxLength" in schema:
        text = text[: int(schema["maxLength"])]
    return text


def reply_for(body: dict[str, Any]) -> str:
    """The reply content for one chat-completions request body."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema", {}).get("schema", {})
        return json.dumps(sample(schema))
    if fmt.get("type") == "json_object":
        return "{}"
    return TEXT_REPLY


FAULTS = (
    "ok",
    "stall",
    "stall_reply",
    "reset",
    "truncated",
    "cut_stop",
    "non_json",
    "error_500",
    "rate_limited",
    "html",
    "empty",
)
"""How the endpoint may answer a request."""


@dataclass
class Script:
    """What the endpoint does: ``faults`` are used one per request, then ``fault`` for the rest.

    Every request is recorded in ``requests`` (``{"path", "headers", "body"}``); ``answered``
    counts the replies actually sent (a stalled request never gets one).
    """

    fault: str = "ok"
    faults: list[str] = field(default_factory=list)
    stall_seconds: float = 3600.0
    retry_after: float = 1.0
    prompt_seconds: float = 0.0
    progress_every: float = 0.0
    stream_progress: bool = True
    """Send the prompt's progress in the stream when asked; off, it shows only in ``/slots`` (a silent stream)."""
    slots: int = 0
    writer: Callable[[dict[str, Any]], str] | None = None
    """Writes the reply to a chat request body (default :func:`reply_for`: a sample of the schema asked for)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    answered: int = 0
    busy_most: int = 0
    """The most requests served at the same time."""
    prompts_read: int = 0
    """Prompts read to their end (``prompt_seconds`` each): a request its client left earlier is not counted."""

    def __post_init__(self) -> None:
        for mode in [self.fault, *self.faults]:
            if mode not in FAULTS:
                raise ValueError(f"unknown fault {mode!r}; one of {', '.join(FAULTS)}")
        self._busy = 0
        self._queue: asyncio.Semaphore | None = None
        self.task = 0
        self.read = 0
        self.batches = 0
        """The task being read, its prompt tokens and batches read so far (what ``/slots`` shows)."""

    def slot_view(self) -> list[dict[str, Any]]:
        """The ``GET /slots`` reply: one slot, its task and counters."""
        state = {"id_task": self.task, "is_processing": self._busy > 0, "n_prompt_tokens_processed": self.read}
        state["n_past"] = self.batches
        return [{"id": 0, **state, "next_token": [{"n_decoded": 0}]}]

    async def take_slot(self) -> None:
        """Wait for a free slot (when ``slots`` is set), then count the request as served."""
        if self.slots:
            if self._queue is None:
                self._queue = asyncio.Semaphore(self.slots)
            await self._queue.acquire()
        self._busy += 1
        self.busy_most = max(self.busy_most, self._busy)

    def free_slot(self) -> None:
        self._busy -= 1
        if self._queue is not None:
            self._queue.release()

    def next_fault(self) -> str:
        return self.faults.pop(0) if self.faults else self.fault


def _cut(content: str) -> str:
    """The first half of ``content`` (a JSON reply cut before it closes)."""
    return content[: max(1, len(content) // 2)]


class DroppedReply(Response):
    """A response that announces its body whole, sends the first half, then drops the connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True})
        # Returning before the body is complete makes the server close the connection mid-reply.


class StalledReply(Response):
    """A response that announces its body whole, sends the first half, then waits ``seconds`` for the rest."""

    def __init__(self, body: bytes, seconds: float) -> None:
        super().__init__(body, media_type="application/json")
        self.seconds = seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True})
        await asyncio.sleep(self.seconds)
        await send({"type": "http.response.body", "body": self.body[len(self.body) // 2 :]})


async def _read_prompt(script: Script, tokens: int, report: bool) -> Any:
    """Take ``script.prompt_seconds`` to read a prompt of ``tokens``; every ``script.progress_every`` seconds of it
    the slot's counter moves and, with ``report``, llama.cpp's progress report is yielded (the first at 0 %)."""
    seconds, every = script.prompt_seconds, script.progress_every
    script.task += 1
    script.read = 0
    start = time.monotonic()
    if every <= 0:
        await asyncio.sleep(seconds)
        script.read = tokens
        script.prompts_read += 1
        return
    done = 0.0
    while True:
        script.read = processed = int(tokens * min(1.0, done / seconds)) if seconds > 0 else tokens
        elapsed = int((time.monotonic() - start) * 1000)
        if report:
            yield {"total": tokens, "cache": 0, "processed": processed, "time_ms": elapsed}
        if done >= seconds:
            script.prompts_read += 1
            return
        step = min(every, seconds - done)
        await asyncio.sleep(step)
        done += step
        script.batches += 1


def _failure(fault: str, script: Script) -> Response | None:
    """The reply of a fault that answers with an HTTP error or an HTML page (None for the others)."""
    if fault == "error_500":
        return JSONResponse({"error": {"message": "scripted server error", "type": "server_error"}}, 500)
    if fault == "rate_limited":
        headers = {"Retry-After": str(script.retry_after)}
        return JSONResponse({"error": {"message": "slow down", "type": "rate_limit"}}, 429, headers=headers)
    if fault == "html":
        return HTMLResponse("<html><body><h1>Welcome to nginx!</h1></body></html>")
    return None


EMBED_DIM = 64


def embed(text: str, base64: bool = False) -> list[float] | str:
    """A deterministic unit vector for ``text`` (hashed words), as floats or base64 float32 bytes."""
    import base64 as b64
    import hashlib
    import math
    import re
    import struct

    vector = [0.0] * EMBED_DIM
    for word in re.findall(r"\w+", text.lower()) or [text]:
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % EMBED_DIM] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    vector = [v / norm for v in vector]
    return b64.b64encode(struct.pack(f"<{EMBED_DIM}f", *vector)).decode() if base64 else vector


def create_app(script: Script | None = None) -> Any:
    """The FastAPI app of the fake endpoint, answering as ``script`` says (default: always well)."""
    script = script or Script()
    app = FastAPI(title="scripted OpenAI-compatible endpoint")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/slots")
    async def slots() -> list[dict[str, Any]]:
        return script.slot_view()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model"}]}

    @app.post("/v1/embeddings")
    async def embeddings(body: dict[str, Any], request: Request) -> Any:
        return await _embeddings(script, body, request)

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any], request: Request) -> Any:
        return await _chat(script, body, request)

    return app


async def _embeddings(script: Script, body: dict[str, Any], request: Request) -> Any:
    """Answer one embeddings request as ``script`` says."""
    script.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})
    fault = script.next_fault()
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else list(texts)
    if fault == "stall":
        await asyncio.sleep(script.stall_seconds)
    failed = _failure(fault, script)
    if failed is not None:
        return failed
    base64 = body.get("encoding_format") == "base64"
    data = [{"object": "embedding", "index": i, "embedding": embed(t, base64)} for i, t in enumerate(texts)]
    if fault == "empty":
        data = []
    tokens = sum(count_tokens(str(t)) for t in texts)
    whole = {
        "object": "list",
        "data": data,
        "model": body.get("model", "scripted"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    if fault == "reset":
        return DroppedReply(json.dumps(whole).encode())
    if fault == "stall_reply":
        return StalledReply(json.dumps(whole).encode(), script.stall_seconds)
    if fault in ("truncated", "cut_stop"):
        return Response(_cut(json.dumps(whole)), media_type="application/json")
    if fault == "non_json":
        return Response(TEXT_REPLY, media_type="application/json")
    script.answered += 1
    return whole


def _spoiled(fault: str, content: str) -> tuple[str, str]:
    """The reply ``content`` and its finish reason after a fault that spoils the text of a reply."""
    if fault == "truncated":
        return _cut(content), "length"
    if fault == "cut_stop":
        return _cut(content), "stop"
    if fault == "non_json":
        return TEXT_REPLY, "stop"
    if fault == "empty":
        return "", "stop"
    return content, "stop"


async def _chat(script: Script, body: dict[str, Any], request: Request) -> Any:
    """Answer one chat-completions request as ``script`` says."""
    script.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})
    fault = script.next_fault()
    if fault == "stall":
        await asyncio.sleep(script.stall_seconds)
    failed = _failure(fault, script)
    if failed is not None:
        return failed
    content, finish = _spoiled(fault, (script.writer or reply_for)(body))
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
    completion = count_tokens(content)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    head = {"id": f"chatcmpl-{time.time_ns()}", "created": int(time.time()), "model": body.get("model", "scripted")}
    if fault == "reset":  # half a reply is no answer: not counted in ``answered``
        message = {"role": "assistant", "content": content}
        whole = {**head, "object": "chat.completion", "choices": [{"index": 0, "message": message}], "usage": usage}
        return DroppedReply(json.dumps(whole).encode())
    if fault == "stall_reply":  # nor is a reply that stops half-way and never goes on
        message = {"role": "assistant", "content": content}
        whole = {**head, "object": "chat.completion", "choices": [{"index": 0, "message": message}], "usage": usage}
        return StalledReply(json.dumps(whole).encode(), script.stall_seconds)
    script.answered += 1
    await script.take_slot()
    if body.get("stream"):
        report = bool(body.get("return_progress")) and script.stream_progress
        return _streamed(script, head, content, finish, usage, prompt, report)
    try:
        async for _ in _read_prompt(script, prompt, False):
            pass
    finally:
        script.free_slot()
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}


def _streamed(
    script: Script,
    head: dict[str, Any],
    content: str,
    finish: str,
    usage: dict[str, Any],
    prompt: int,
    report: bool,
) -> StreamingResponse:
    """The reply as server-sent chunks: prompt progress (with ``report``), the content, usage."""

    def chunk(delta: dict[str, Any], **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": extra.pop("finish_reason", None)}
        return f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': [choice], **extra})}\n\n"

    async def events() -> Any:
        try:
            async for progress in _read_prompt(script, prompt, report):
                yield chunk({"role": "assistant", "content": None}, prompt_progress=progress)
            for start in range(0, max(1, len(content)), PIECE):
                yield chunk({"role": "assistant", "content": content[start : start + PIECE]})
            yield chunk({}, finish_reason=finish, usage=usage)
            yield "data: [DONE]\n\n"
        finally:
            script.free_slot()

    return StreamingResponse(events(), media_type="text/event-stream")


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` in a thread on a loopback socket bound here (``listening_socket``); yields its URL."""
    import uvicorn

    sock = listening_socket()
    port = int(sock.getsockname()[1])
    # Stalled requests are cancelled at shutdown; that is expected, so only critical logs show.
    config = uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            sock.close()
            raise RuntimeError("the scripted endpoint did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def refusing() -> Iterator[str]:
    """A loopback URL that refuses every connection while the block runs.

    Its port is bound and never listened on, so no other server (a parallel test's) can take it meanwhile.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def chat_replies(body: dict[str, Any]) -> str:
    """A reply of the scripted chat model (:func:`doubles.replies.offload_reply`): answers made from the prompt."""
    from doubles.replies import offload_reply

    return _made_by(offload_reply, body)


def workflow_replies(body: dict[str, Any]) -> str:
    """A reply of the scripted model of ask, summarize and chat (:func:`doubles.replies.workflow_reply`)."""
    from doubles.replies import workflow_reply

    return _made_by(workflow_reply, body)


def _made_by(reply: Callable[[Any], str], body: dict[str, Any]) -> str:
    from langchain_core.messages import convert_to_messages

    return reply(convert_to_messages(body.get("messages") or []))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="listen on this loopback port")
    where.add_argument("--fd", type=int, help="serve on this listening socket, inherited from the parent process")
    parser.add_argument("--fault", choices=FAULTS, default="ok", help="misbehave this way on every request")
    parser.add_argument(
        "--replies", choices=("sample", "chat"), default="sample", help="chat: the chat's answers made from the prompt"
    )
    args = parser.parse_args(argv)
    import uvicorn

    script = Script(fault=args.fault, writer=chat_replies if args.replies == "chat" else None)
    place: dict[str, Any] = {"fd": args.fd} if args.fd is not None else {"host": "127.0.0.1", "port": args.port}
    uvicorn.run(create_app(script), log_level="warning", **place)


if __name__ == "__main__":
    main()
