"""Sessions of the clients people point at a LangGraph server, run against a served longdoc.

Each function drives one client the way it is used and returns what the tests check:
``langgraph_sdk`` as Studio's chat view and Agent Chat UI call it, the official ``mcp`` client,
``langchain-mcp-adapters`` tools in a LangGraph agent, and A2A JSON-RPC. Every call has a timeout.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph_sdk import get_sync_client

from doubles.chat import ScriptedChatModel
from stores.status import is_status

TIMEOUT = 120.0


def sdk(url: str, key: str | None = None) -> Any:
    return get_sync_client(url=url, api_key=key, timeout=TIMEOUT)


def chat_turn(client: Any, thread_id: str, text: Any, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """One turn as a chat UI sends it: a human message (words, or content blocks), ``messages-tuple`` and
    ``values`` streamed."""
    chunks: list[tuple[dict[str, Any], dict[str, Any]]] = []
    values: dict[str, Any] = {}
    errors: list[Any] = []
    for part in client.runs.stream(
        thread_id,
        "chat",
        input={"messages": [{"type": "human", "content": text}]},
        context=context,
        stream_mode=["values", "messages-tuple"],
    ):
        if part.event == "messages":
            chunks.append((part.data[0], part.data[1]))
        elif part.event == "values":
            values = part.data
        elif part.event == "error":
            errors.append(part.data)
    assert not errors, errors
    return {"chunks": chunks, "values": values}


def check_chat_turn(turn: dict[str, Any], number: int) -> dict[str, Any]:
    """The checks a chat client relies on; returns the turn's answer message."""
    values = turn["values"]
    # each step's status message (stores.status) is streamed too, and the thread does not keep it
    statuses = [c for c, _ in turn["chunks"] if is_status(c.get("id"))]
    assert "_writing the answer..._" in "".join(str(c["content"]) for c in statuses), statuses
    assert not any(is_status(m.get("id")) or "_writing the answer" in str(m["content"]) for m in values["messages"])
    chunks = [(c, meta) for c, meta in turn["chunks"] if not is_status(c.get("id"))]
    tokens = [c for c, _ in chunks if c.get("type") == "AIMessageChunk"]
    assert len(tokens) > 1, chunks  # the answer arrives in pieces, as it is written
    assert {meta.get("langgraph_node") for _, meta in chunks} == {"answer"}, [m for _, m in chunks]
    # One message per turn, whatever the turn did (the scripted model asks to recall whenever it may):
    # the answer's words, then the sources it cites, as the thread keeps them.
    streamed: dict[str, str] = {}
    for chunk in tokens:
        streamed[chunk["id"]] = streamed.get(chunk["id"], "") + str(chunk["content"])
    reply = values["messages"][-1]
    assert reply["type"] == "ai" and list(streamed) == [reply["id"]]
    assert streamed[reply["id"]] == reply["content"]
    assert reply["content"].startswith(values["answer"] + "\n\n**Sources**")
    meta = reply["additional_kwargs"]["longdoc"]
    assert meta["turn"] == number and meta["citations"] == values["citations"]
    assert meta["sources"] == values["sources"] and f"\n- [{values['sources'][0]['label']}] " in reply["content"]
    assert len(values["messages"]) == 2 * number
    return reply


def mcp_session(
    url: str, calls: list[tuple[str, dict[str, Any]]], headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """The official MCP client: initialize, list tools, then each ``(tool, arguments)`` call with a progress
    callback; what each returned, and the progress messages each heard (``progress``).

    An argument ``"thread_id": "<previous>"`` is the ``thread_id`` the previous call's result holds.
    """
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> dict[str, Any]:
        async with (
            httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(TIMEOUT, connect=10)) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            info = await asyncio.wait_for(client.initialize(), 30)
            tools = await asyncio.wait_for(client.list_tools(), 60)
            results: list[Any] = []
            progress: list[list[str]] = []
            for name, args in calls:
                heard: list[str] = []

                async def hear(done: float, total: float | None, message: str | None, into: list[str] = heard) -> None:
                    into.append(str(message))

                if args.get("thread_id") == "<previous>":
                    args = {**args, "thread_id": (results[-1].structuredContent or {}).get("thread_id", "")}
                results.append(await asyncio.wait_for(client.call_tool(name, args, progress_callback=hear), TIMEOUT))
                progress.append(heard)
            return {"info": info, "tools": {t.name: t for t in tools.tools}, "results": results, "progress": progress}

    return asyncio.run(session())


def ask_tool(doc_id: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    """An MCP call of the ``ask`` tool about ``doc_id``."""
    return "ask", {"doc_id": doc_id, "question": "Who manages procurement?", **extra}


def text_of(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def tool_agent_model(doc_id: str) -> ScriptedChatModel:
    """A scripted agent model: asks the ``ask`` tool, then answers with what the tool returned."""

    def reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"longdoc says: {last.content}")
        name, args = ask_tool(doc_id)
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call-1"}])

    return ScriptedChatModel(default=reply)


def adapters_agent(url: str, doc_id: str, headers: dict[str, str] | None = None) -> list[BaseMessage]:
    """``langchain-mcp-adapters`` loads the served tools into a LangGraph agent; the agent's messages."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    async def run() -> list[BaseMessage]:
        server: dict[str, Any] = {"url": f"{url}/mcp", "transport": "streamable_http"}
        if headers:
            server["headers"] = headers
        tools = await asyncio.wait_for(MultiServerMCPClient({"longdoc": server}).get_tools(), 60)
        model = tool_agent_model(doc_id).bind_tools(tools)

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        out = await asyncio.wait_for(
            builder.compile().ainvoke({"messages": [("user", "Who manages procurement?")]}), TIMEOUT
        )
        return list(out["messages"])

    return asyncio.run(run())


def a2a_send(
    url: str,
    assistant_id: str,
    parts: list[dict[str, Any]],
    context_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One A2A ``SendMessage`` (JSON-RPC 2.0) to an assistant; the task it returns."""
    message: dict[str, Any] = {"role": "ROLE_USER", "parts": parts, "messageId": str(uuid.uuid4())}
    if context_id:
        message["contextId"] = context_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(f"{url}/a2a/{assistant_id}", json=body, headers=headers, timeout=TIMEOUT)
    answer.raise_for_status()
    reply = answer.json()
    assert "result" in reply, reply
    return dict(reply["result"]["task"])


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []))


def a2a_sdk_conversation(
    url: str, assistant: str, turns: list[list[dict[str, Any]]], headers: dict[str, str] | None = None
) -> list[list[dict[str, Any]]]:
    """The official A2A SDK's client, with its defaults (streaming, since the card says so): one message per
    turn in one context; every event of each turn, as JSON."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, SendMessageRequest
    from google.protobuf.json_format import MessageToDict, ParseDict

    async def run() -> list[list[dict[str, Any]]]:
        async with httpx.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(f"{url}/a2a/{assistant}")
            context_id, out = "", []
            for parts in turns:
                message: dict[str, Any] = {"role": "ROLE_USER", "parts": parts, "messageId": str(uuid.uuid4())}
                if context_id:
                    message["contextId"] = context_id
                request = SendMessageRequest(message=ParseDict(message, Message()))
                events = [MessageToDict(e) async for e in client.send_message(request)]
                context_id = next((e["task"]["contextId"] for e in events if "task" in e), context_id)
                out.append(events)
            return out

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT * len(turns)))


def streamed_answer(events: list[dict[str, Any]]) -> tuple[str, str]:
    """What a streaming A2A client shows of a turn: the artifact's text as its chunks came, and the final state."""
    text = "".join(
        p.get("text", "") for e in events if "artifactUpdate" in e for p in e["artifactUpdate"]["artifact"]["parts"]
    )
    states = [(e.get("statusUpdate") or e.get("task") or {}).get("status", {}).get("state", "") for e in events]
    states = [s for s in states if s]
    return text, states[-1] if states else ""
