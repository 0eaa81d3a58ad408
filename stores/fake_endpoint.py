"""A scripted OpenAI-compatible chat endpoint for tests of whole servers (no model weights).

``python -m stores.fake_endpoint --port N`` serves ``POST /v1/chat/completions``: a request
with a JSON-schema ``response_format`` gets the smallest instance of that schema (first enum
value, minimum list lengths, ``c0`` for id-like strings), any other request a short cited
sentence. Token usage is estimated from the text. Point ``LONGDOC_BASE_URL`` at it to run every
graph through a real HTTP model call path in seconds, e.g. under ``langgraph dev``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from stores.text import count_tokens

TEXT_REPLY = "The document answers this in its first section [c0]."


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


def create_app() -> Any:
    """The FastAPI app of the fake endpoint."""
    from fastapi import FastAPI

    app = FastAPI(title="scripted OpenAI-compatible endpoint")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> Any:
        content = reply_for(body)
        prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
        completion = count_tokens(content)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        head = {"id": f"chatcmpl-{time.time_ns()}", "created": int(time.time()), "model": body.get("model", "scripted")}
        if body.get("stream"):
            from fastapi.responses import StreamingResponse

            def events() -> Any:
                delta = {"role": "assistant", "content": content}
                first = {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
                yield f"data: {json.dumps(first)}\n\n"
                done = {"index": 0, "delta": {}, "finish_reason": "stop"}
                last = {**head, "object": "chat.completion.chunk", "choices": [done], "usage": usage}
                yield f"data: {json.dumps(last)}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return {**head, "object": "chat.completion", "choices": [choice], "usage": usage}

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    import uvicorn

    uvicorn.run(create_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
