"""The scale-out deployment over real backends: two Aegra instances, PostgreSQL and a Chroma server.

The model is the scripted OpenAI-compatible endpoint of :mod:`doubles.endpoint` (in this
process, on loopback); embeddings are the deterministic hash embedder. Each instance has its own
empty ``LONGDOC_HOME``, so whatever one sees of the other's work came through the databases.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from deploy.cluster import Deployment, chroma_binary, deployment, postgres_bindir
from deploy.demo import walkthrough
from deploy.mcp import RESULT_FIELDS
from doubles.endpoint import Script, create_app, running, workflow_replies
from doubles.files import pdf_with_text
from surfaces.registry import DESCRIPTIONS
from tests.integration import clients

ROOT = Path(__file__).resolve().parents[2]
FALCON = (ROOT / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
KEYS = {
    "team-a": "key-a",
    "team-b": {"key": "key-b", "namespaces": ["team-b", "team-b-archive"]},
    "team-c": {"key": "key-c", "namespaces": ["shared"]},
    "team-d": {"key": "key-d", "namespaces": ["shared"]},
}
MAX_BYTES = 100_000
"""The instances' ``LONGDOC_MAX_BYTES``: over the documents of these tests, under the files sent to be refused."""

pytestmark = [
    pytest.mark.skipif(
        postgres_bindir() is None or chroma_binary() is None,
        reason="PostgreSQL server binaries or the chroma command are not installed (.ci/system-deps, make install)",
    ),
    pytest.mark.xdist_group("scaleout"),  # one deployment for the module, in one test process
]


def _env(endpoint: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(
        {
            "LONGDOC_BASE_URL": f"{endpoint}/v1",
            "LONGDOC_MODEL": "scripted",
            "LONGDOC_EMBEDDER": "hash",
            "LONGDOC_SERVER_KEYS": json.dumps(KEYS),
            "LONGDOC_MAX_BYTES": str(MAX_BYTES),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return env


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[Script, str]]:
    script = Script(prompt_seconds=0.02)
    with running(create_app(script)) as url:
        yield script, url


@pytest.fixture(scope="module")
def ingest_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The instances' ``LONGDOC_INGEST_ROOT``."""
    return tmp_path_factory.mktemp("root")


@pytest.fixture(scope="module")
def cluster(model: tuple[Script, str], ingest_root: Path) -> Iterator[Deployment]:
    with deployment({**_env(model[1]), "LONGDOC_INGEST_ROOT": str(ingest_root)}, instances=2) as deploy:
        yield deploy


def client(instance: Any, key: str = "key-a") -> Any:
    return get_sync_client(url=instance.url, api_key=key, timeout=120)


def test_documents_and_threads_are_shared_between_instances(cluster: Deployment) -> None:
    """The walkthrough of docs/deployment.md: ingest on A; ask, summarize and chat on B; the chat goes on on A."""
    a, b = cluster.instances[0].url, cluster.instances[1].url
    report = walkthrough(a, b, "key-a", FALCON)
    assert report["chunks"] > 0 and report["b_found_the_document"]
    assert report["answer"] and report["read"] and report["summary"]
    assert report["chat_turns"] == [1, 2]
    assert report["same_thread_state"] and report["same_history"]


def test_requests_without_a_valid_key_are_refused_everywhere(cluster: Deployment) -> None:
    url = cluster.instances[0].url
    routes = [
        ("GET", "/live"),
        ("GET", "/health"),
        ("GET", "/info"),
        ("GET", "/docs"),
        ("GET", "/openapi.json"),
        ("POST", "/threads"),
        ("POST", "/threads/search"),
        ("POST", "/assistants/search"),
        ("POST", "/threads/x/runs/wait"),
        ("GET", "/threads/x/state"),
        ("PUT", "/store/items"),
    ]
    for key in (None, "wrong-key"):
        headers = {"X-API-Key": key} if key else {}
        for method, path in routes:
            answer = httpx.request(method, url + path, headers=headers, json={}, timeout=30)
            assert answer.status_code == 401, (method, path, key, answer.text)
    assert httpx.get(url + "/live", headers={"Authorization": "Bearer key-b"}, timeout=30).status_code == 200


def test_a_tenant_reaches_only_its_own_threads_and_namespaces(cluster: Deployment) -> None:
    a = client(cluster.instances[0], "key-a")
    b = client(cluster.instances[1], "key-b")
    b_on_a = client(cluster.instances[0], "key-b")
    own = a.threads.create()["thread_id"]
    doc_id = a.runs.wait(own, "ingest", input={"text": FALCON, "title": "falcon"})["doc_id"]

    assert own not in {t["thread_id"] for t in b.threads.search(limit=100)}
    assert own not in {t["thread_id"] for t in b_on_a.threads.search(limit=100)}
    for call in (
        lambda: b.threads.get(own),
        lambda: b.threads.get_state(own),
        lambda: b.threads.get_history(own),
        lambda: b.runs.wait(own, "ask", input={"doc_id": doc_id, "question": "Who buys?"}),
        lambda: b.runs.create(own, "chain", input={"doc_id": doc_id, "question": "Who buys?"}),
        lambda: b.runs.wait(own, "ask", command={"goto": None}),
        lambda: b.runs.wait(b.threads.create()["thread_id"], "chain", input={"question": "?"}, config=_ns("team-a")),
        lambda: b.runs.wait(b.threads.create()["thread_id"], "ingest", input={"text": "x", "namespace": "team-a"}),
        lambda: b.assistants.create(graph_id="chain", config={"configurable": {"base_url": "http://127.0.0.1:9"}}),
        lambda: b.store.put_item(["team-a"], "k", {"v": 1}),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            call()
        assert refused.value.response.status_code in (403, 404), refused.value.response.text

    # A's thread id and an id nobody holds get one answer (404), and no SQL statement in any error;
    # thread ids are chosen by the server, so B cannot create a thread under A's id either.
    url, as_b = cluster.instances[1].url, {"X-API-Key": "key-b"}
    answers = []
    for thread in (own, str(uuid.uuid4())):
        ran = httpx.post(f"{url}/threads/{thread}/runs/wait", headers=as_b, json={"assistant_id": "chain"}, timeout=60)
        answers.append((ran.status_code, ran.text.replace(thread, "ID")))
        made = httpx.post(f"{url}/threads", headers=as_b, json={"thread_id": thread}, timeout=60)
        assert made.status_code == 400 and "SELECT" not in made.text and "INSERT" not in made.text, made.text
    assert answers[0] == answers[1] and answers[0][0] == 404, answers

    # A's doc_id in B's own namespace names nothing: the run fails without reading A's document.
    thread = b.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        b.runs.wait(thread, "chain", input={"doc_id": doc_id, "question": "Who manages procurement?"})
    assert (
        refused.value.response.status_code == 400
        and "is not ingested in namespace 'team-b'" in refused.value.response.text
    )
    assert [run["status"] for run in b.runs.list(thread)] == ["error"]
    assert b.threads.get_state(thread)["values"].get("answer") is None

    # Caller settings outside the served list (a model endpoint) are refused; its second namespace is open.
    with pytest.raises(httpx.HTTPStatusError) as refused:
        b.runs.wait(b.threads.create()["thread_id"], "chain", input={"question": "?"}, context={"base_url": "x"})
    assert refused.value.response.status_code == 400
    archive = b.runs.wait(
        b.threads.create()["thread_id"], "ingest", input={"text": FALCON}, context={"namespace": "team-b-archive"}
    )
    assert archive["doc_id"] == doc_id  # the same content hash, indexed again in B's own namespace

    # A thread stays in the namespace of its first run, on every instance (bound in PostgreSQL).
    bound = b.threads.create()["thread_id"]
    b.runs.wait(bound, "ingest", input={"text": FALCON}, context={"namespace": "team-b"})
    with pytest.raises(httpx.HTTPStatusError) as refused:
        b_on_a.runs.wait(bound, "ingest", input={"text": FALCON}, context={"namespace": "team-b-archive"})
    assert refused.value.response.status_code == 403


def test_a_wait_whose_run_is_refused_in_the_graph_answers_with_its_status(cluster: Deployment) -> None:
    b = client(cluster.instances[1], "key-b")
    thread = b.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:  # Aegra alone: 200 and {}
        b.runs.wait(thread, "ask", input={"doc_id": "0123456789abcdef", "question": "Who buys?"})
    answer = refused.value.response
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == "document '0123456789abcdef' is not ingested in namespace 'team-b'"
    assert [run["status"] for run in b.runs.list(thread)] == ["error"]


def test_a_chat_client_streams_a_conversation_across_instances(cluster: Deployment) -> None:
    """Studio's chat view / Agent Chat UI: turn 1 on one instance, turn 2 on the other, same thread."""
    a, b = client(cluster.instances[0]), client(cluster.instances[1])
    doc_id = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"text": FALCON})["doc_id"]
    thread = a.threads.create()["thread_id"]
    first = clients.chat_turn(a, thread, "Who manages procurement?", context={"doc_id": doc_id})
    assert clients.check_chat_turn(first, 1)["additional_kwargs"]["longdoc"]["doc_id"] == doc_id
    clients.check_chat_turn(clients.chat_turn(b, thread, "When do the field trials start?"), 2)
    assert [m["type"] for m in b.threads.get_state(thread)["values"]["messages"]] == ["human", "ai", "human", "ai"]


def test_mcp_tools_on_every_instance_behind_the_tenant_keys(cluster: Deployment) -> None:
    a = client(cluster.instances[0])
    text = FALCON + "\n\nThis copy is read through the MCP tools."  # content no other test ingests for B
    doc_id = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"text": text})["doc_id"]
    key_a, key_b = {"X-API-Key": "key-a"}, {"Authorization": "Bearer key-b"}
    for instance in cluster.instances[:2]:
        calls = [
            clients.ask_tool(doc_id),
            ("ask", {"question": "Who?"}),
            ("ask", {"question": 5}),
            ("ask", {"question": "Who?", "doc_id": "not-an-id"}),
            ("chat", {"question": "Who manages procurement?", "doc_id": doc_id}),
            ("chat", {"question": "When do the field trials start?", "thread_id": "<previous>"}),
            ("documents", {}),
        ]
        session = clients.mcp_session(instance.url, calls, headers=key_a)
        assert list(session["tools"]) == ["ingest", "ask", "summarize", "chat", "route", "documents"]
        for name, tool in session["tools"].items():
            assert tool.description == DESCRIPTIONS.get(name, tool.description) and tool.outputSchema
            properties = tool.inputSchema["properties"]
            assert "messages" not in properties and all(p.get("description") for p in properties.values())
        good, missing, wrong, malformed, chat, again, listed = session["results"]
        assert not good.isError and good.structuredContent["answer"] and good.structuredContent["citations"]
        assert json.loads(clients.text_of(good)) == good.structuredContent  # JSON, not Python repr
        assert (
            missing.isError and clients.text_of(missing) == "ask failed: no document: give one of doc_id, path or text"
        )
        assert wrong.isError and "validation" in clients.text_of(wrong)
        assert malformed.isError and "does not match '^[0-9a-f]{16}$'" in clients.text_of(malformed)
        assert set(chat.structuredContent) == set(RESULT_FIELDS["chat"])  # every field its output schema declares
        assert [d["doc_id"] for d in chat.structuredContent["documents"]] == [doc_id]
        assert not again.isError, clients.text_of(again)
        assert again.structuredContent["turn"] == 2  # the conversation went on by its thread_id
        assert again.structuredContent["thread_id"] == chat.structuredContent["thread_id"]
        assert doc_id in [d["doc_id"] for d in listed.structuredContent["documents"]]
        assert "answer written" in session["progress"][0] and "message taken" in session["progress"][4]

    # Tenant B sees neither A's document nor A's namespace through its tools.
    foreign = clients.mcp_session(
        cluster.instances[1].url, [clients.ask_tool(doc_id), clients.ask_tool(doc_id, namespace="team-a")], key_b
    )
    unknown, refused = foreign["results"]
    assert unknown.isError and "is not ingested in namespace 'team-b'" in clients.text_of(unknown)
    assert refused.isError and "403" in clients.text_of(refused)
    # nor A's conversation, nor A's documents
    thread = session["results"][4].structuredContent["thread_id"]
    calls = [("chat", {"question": "What else?", "thread_id": thread}), ("documents", {})]
    joined, theirs = clients.mcp_session(cluster.instances[1].url, calls, key_b)["results"]
    assert joined.isError and "refused (404)" in clients.text_of(joined)
    assert doc_id not in [d["doc_id"] for d in theirs.structuredContent["documents"]]

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in (accept, {**accept, "X-API-Key": "wrong"}):
        answer = httpx.post(cluster.instances[0].url + "/mcp", json=initialize, headers=headers, timeout=30)
        assert answer.status_code == 401, answer.text

    messages = clients.adapters_agent(cluster.instances[1].url, doc_id, headers=key_a)
    tool = [m for m in messages if m.type == "tool"]
    assert len(tool) == 1 and '"answer"' in str(tool[0].content) and messages[-1].content.startswith("longdoc says:")


def test_an_a2a_caller_converses_across_instances(cluster: Deployment) -> None:
    a, b = cluster.instances[0].url, cluster.instances[1].url
    c = client(cluster.instances[0])
    doc_id = c.runs.wait(c.threads.create()["thread_id"], "ingest", input={"text": FALCON})["doc_id"]
    key_a = {"X-API-Key": "key-a"}
    card = httpx.get(f"{a}/a2a/chat/.well-known/agent-card.json", headers=key_a, timeout=30).json()
    assert card["skills"][0]["examples"] and card["supportedInterfaces"][0]["url"] == f"{a}/a2a/chat"
    assert httpx.get(f"{a}/.well-known/agent-card.json", headers=key_a, timeout=30).json() == card
    first = clients.a2a_send(
        a, "chat", [{"text": "Who manages procurement?"}, {"data": {"doc_id": doc_id}}], None, key_a
    )
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    second = clients.a2a_send(b, "offload", [{"text": "And the budget?"}], first["contextId"], key_a)  # former id
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    state = c.threads.get_state(first["contextId"])["values"]
    assert state["turn"] == 2 and clients.artifact_text(second) == state["messages"][-1]["content"]
    assert clients.artifact_text(first) == state["messages"][1]["content"]

    # Another tenant cannot join the conversation (the answer an unknown one gets); a key-less call never reaches it.
    other = clients.a2a_send(b, "chat", [{"text": "What else?"}], first["contextId"], {"X-API-Key": "key-b"})
    nobody = clients.a2a_send(b, "chat", [{"text": "What else?"}], str(uuid.uuid4()), {"X-API-Key": "key-b"})
    refusal = other["status"]["message"]["parts"][0]["text"]
    assert other["status"]["state"] == nobody["status"]["state"] == "TASK_STATE_REJECTED" and "404" in refusal
    assert refusal.replace(first["contextId"], "ID") == nobody["status"]["message"]["parts"][0]["text"].replace(
        nobody["contextId"], "ID"
    )
    assert c.threads.get_state(first["contextId"])["values"]["turn"] == 2
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
    assert httpx.post(f"{a}/a2a/chat", json=body, timeout=30).status_code == 401
    unknown = httpx.post(f"{a}/a2a/ask", json=body, headers=key_a, timeout=30).json()
    assert unknown["error"]["code"] == -32602

    # The official SDK's client, streaming (its default), across both instances: a PDF in the first message.
    pdf = base64.b64encode(pdf_with_text("Bob Chen manages procurement. Field trials start in June.")).decode()
    turns = [
        [{"text": "Who manages procurement?"}, {"raw": pdf, "mediaType": "application/pdf", "filename": "brief.pdf"}],
        [{"text": "When do the trials start?"}],
    ]
    for events in clients.a2a_sdk_conversation(a, "chat", turns, key_a):
        text, state = clients.streamed_answer(events)
        assert state == "TASK_STATE_COMPLETED" and "**Sources**" in text, events
        last = [e["artifactUpdate"] for e in events if "artifactUpdate" in e][-1]
        assert last["lastChunk"] and last["artifact"]["parts"][-1]["data"]["sources"]


def test_a_document_dropped_into_the_chat_stays_in_the_tenants_namespace(cluster: Deployment) -> None:
    a, b = client(cluster.instances[0]), client(cluster.instances[1], "key-b")
    pdf = base64.b64encode(pdf_with_text("Ana Ruiz signs the supplier contract in May.")).decode()
    block = {"type": "file", "base64": pdf, "mime_type": "application/pdf", "extras": {"filename": "contract.pdf"}}
    words = {"type": "text", "text": "Who signs the supplier contract?"}
    thread = b.threads.create()["thread_id"]
    turn = clients.chat_turn(b, thread, [words, block])
    reply = clients.check_chat_turn(turn, 1)
    doc_id = reply["additional_kwargs"]["longdoc"]["doc_id"]
    kept = b.threads.get_state(thread)["values"]["messages"][0]["content"]
    assert "Ana Ruiz" in reply["content"] and "[attached contract.pdf: document " in str(kept)
    # ingested at the door: neither Aegra's run record nor any checkpoint holds the upload
    import psycopg

    needle = pdf[len(pdf) // 2 :][:60]
    with psycopg.connect(cluster.postgres_url, autocommit=True) as conn:
        for table in ("runs", "run_events", "thread", "checkpoints"):
            found = conn.execute(
                f"SELECT count(*) FROM {table} WHERE position(%s in CAST({table} AS text)) > 0", (needle,)
            )
            assert found.fetchone() == (0,), table
        for table in ("checkpoint_writes", "checkpoint_blobs"):
            found = conn.execute(
                f"SELECT count(*) FROM {table} WHERE position(convert_to(%s, 'UTF8') in blob) > 0", (needle,)
            )
            assert found.fetchone() == (0,), table
    # several files in one message: the conversation's collection, ingested at the door like one
    herons = {
        "type": "text-plain",
        "text": "Herons wade in shallow water.",
        "mime_type": "text/plain",
        "title": "herons.txt",
    }
    many = b.threads.create()["thread_id"]
    values = clients.chat_turn(b, many, [words, block, herons])["values"]
    assert [m["type"] for m in values["messages"]] == ["human", "ai"] and values["turn"] == 1
    named = [(d["tag"], d["source"], d["title"]) for d in values["documents"]]
    assert named == [(1, "contract.pdf", "Ana Ruiz signs the supplier contract in May."), (2, "text", "herons.txt")]
    notes = str(values["messages"][0]["content"])
    assert "[attached contract.pdf: document " in notes and "[attached herons.txt: document " in notes
    # tenant A cannot reach it, and B cannot drop a file into A's namespace
    asked = clients.mcp_session(cluster.instances[0].url, [clients.ask_tool(doc_id)], {"X-API-Key": "key-a"})
    assert "is not ingested in namespace 'team-a'" in clients.text_of(asked["results"][0])
    message = {"messages": [{"type": "human", "content": [words, block]}]}
    refusals = [
        (message, {"namespace": "team-a"}, 403, "namespace 'team-a' is not open to this API key"),
        (
            {"messages": [{"type": "human", "content": [words, {**block, "mime_type": "text/csv", "extras": {}}]}]},
            None,
            400,
            "unsupported type text/csv; attach a PDF, DOCX, HTML, Markdown or text file",
        ),
        (
            {
                "messages": [
                    {
                        "type": "human",
                        "content": [
                            words,
                            {"type": "text-plain", "text": "x" * (MAX_BYTES + 10), "mime_type": "text/plain"},
                        ],
                    }
                ]
            },
            None,
            413,
            f"text is larger than the {MAX_BYTES} byte limit (LONGDOC_MAX_BYTES)",
        ),
        (
            {"messages": [{"type": "human", "content": [words, {**block, "base64": "A" * (MAX_BYTES * 2)}]}]},
            None,
            413,
            f"contract.pdf: {MAX_BYTES * 3 // 2} bytes is over the {MAX_BYTES} byte limit (LONGDOC_MAX_BYTES)",
        ),
    ]
    refused_thread = b.threads.create()["thread_id"]
    for value, context, status, said in refusals:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            b.runs.wait(refused_thread, "chat", input=value, context=context)
        answer = refused.value.response
        assert answer.status_code == status and said in answer.json()["message"], (status, answer.text)
    assert b.runs.list(refused_thread) == []  # refused before any run
    # a first message without a document is answered with what to attach, on the SDK and over A2A
    first = clients.chat_turn(a, a.threads.create()["thread_id"], "Who signs the supplier contract?")["values"]
    assert [m["type"] for m in first["messages"]] == ["human", "ai"]
    assert first["messages"][-1]["content"].startswith("To talk about a document, attach it to your message")
    task = clients.a2a_send(cluster.instances[1].url, "chat", [{"text": "What is new?"}], None, {"X-API-Key": "key-a"})
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    asked = task["status"]["message"]["parts"][0]["text"]
    assert asked.startswith("To talk about a document, attach it to your message")
    sheet = [{"text": "Sum it up"}, {"raw": "YSxiCg==", "mediaType": "text/csv", "filename": "sheet.csv"}]
    rejected = clients.a2a_send(cluster.instances[1].url, "chat", sheet, None, {"X-API-Key": "key-a"})
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
    assert "refused (400): sheet.csv: unsupported type" in rejected["status"]["message"]["parts"][0]["text"]


def _ns(namespace: str) -> dict[str, Any]:
    return {"configurable": {"namespace": namespace}}


def _long_document(sections: int = 10) -> str:
    topics = ["pumps", "panels", "budget", "trials", "suppliers", "training", "water", "soil", "weather", "repairs"]
    return "\n\n".join(
        f"# Part {i}: {topics[i % len(topics)]}\n\n"
        + " ".join(f"Finding {i}.{j} about {topics[i % len(topics)]} in region {i * 7 + j}." for j in range(12))
        for i in range(sections)
    )


def _worker_prompts(script: Script, start: int, end: int | None = None) -> list[str]:
    bodies = [r["body"] for r in script.requests[start:end] if r["path"].endswith("/chat/completions")]
    return [json.dumps(b["messages"], sort_keys=True) for b in bodies]


def test_a_run_survives_its_instance_being_killed(cluster: Deployment) -> None:
    script = Script(prompt_seconds=0.4)
    with running(create_app(script)) as endpoint:
        slow = {"LONGDOC_BASE_URL": f"{endpoint}/v1"}
        doomed = cluster.start_instance("doomed", extra_env=slow)
        heir = cluster.start_instance("heir", extra_env=slow)
        first, second = client(doomed), client(heir)
        text = {"text": _long_document()}
        doc_id = second.runs.wait(
            second.threads.create()["thread_id"], "ingest", input=text, context={"chunk_size": 60}
        )
        ask = {"doc_id": doc_id["doc_id"], "question": "What was found about the suppliers and the weather?"}
        settings = {"read_all": True, "order": "original"}  # one chunk per worker: a long chain

        start = len(script.requests)
        reference = second.runs.wait(second.threads.create()["thread_id"], "chain", input=ask, context=settings)
        uninterrupted = _worker_prompts(script, start)
        assert len(uninterrupted) >= 8, "the chain must be long enough to be killed half-way"

        thread = first.threads.create()["thread_id"]
        start = len(script.requests)
        first.runs.create(thread, "chain", input=ask, context=settings)
        deadline = time.monotonic() + 120
        while len(_worker_prompts(script, start)) < len(uninterrupted) // 2:
            assert time.monotonic() < deadline, "the run on the first instance did not get half-way"
            time.sleep(0.05)
        doomed.kill()
        killed_at = len(script.requests)
        before = _worker_prompts(script, start, killed_at)

        # The same input again on the same thread, as a LangServe client would send it: the guard
        # turns it into a resume of the dead run (deploy.app.continue_dead_run).
        resumed = second.runs.wait(thread, "chain", input=ask, context=settings)
        after = _worker_prompts(script, killed_at)

    for key in ("answer", "read", "citations", "calls", "order", "stopped", "notes"):
        if key in reference:
            assert resumed[key] == reference[key], key
    repeated = set(before) & set(after)
    assert len(repeated) <= 1 and (not repeated or before[-1] in repeated), "a finished worker call was made again"
    # The worker call in flight when the instance died (the last one it sent) is made again; no other call is.
    finished = before[:-1] if repeated else before
    assert sorted(finished + after) == sorted(uninterrupted)


def test_a_run_stops_at_the_run_deadline(cluster: Deployment) -> None:
    """LONGDOC_RUN_TIMEOUT reaches the model calls of a run on Aegra, as on LangServe."""
    script = Script(prompt_seconds=0.5)
    with running(create_app(script)) as endpoint:
        short = cluster.start_instance(
            "short", extra_env={"LONGDOC_BASE_URL": f"{endpoint}/v1", "LONGDOC_RUN_TIMEOUT": "2"}
        )
        c = client(short)
        doc_id = c.runs.wait(c.threads.create()["thread_id"], "ingest", input={"text": _long_document()})["doc_id"]
        thread = c.threads.create()["thread_id"]
        sent = len(script.requests)
        with pytest.raises(httpx.HTTPStatusError) as stopped:
            c.runs.wait(
                thread, "chain", input={"doc_id": doc_id, "question": "What was found?"}, context={"read_all": True}
            )
        calls = len(_worker_prompts(script, sent))
    assert stopped.value.response.status_code == 503 and "LONGDOC_RUN_TIMEOUT" in stopped.value.response.text
    run = c.runs.list(thread)[0]
    assert run["status"] == "error" and "LONGDOC_RUN_TIMEOUT" in run["error_message"], run
    # Each reply takes 0.5 s to begin and the chain's calls go one after another: in 2 s the run sends at most
    # 4 of them and the one its deadline cuts, however busy the machine (a busier one sends fewer).
    assert calls <= 2 / 0.5 + 1, calls


def test_an_instance_starts_with_a_keys_file_of_digests_alone(cluster: Deployment, tmp_path: Path) -> None:
    """The form docs/security.md recommends: no plain key for the launcher's start-up probe, which needs none."""
    from surfaces.access import key_digest

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"team-d": f"sha256:{key_digest('key-d')}"}), encoding="utf-8")
    digests = cluster.start_instance("digests", timeout=90, extra_env={"LONGDOC_SERVER_KEYS": str(keys)})
    assert httpx.get(digests.url + "/live", headers={"X-API-Key": "key-d"}, timeout=30).status_code == 200
    assert httpx.get(digests.url + "/live", headers={"X-API-Key": "key-a"}, timeout=30).status_code == 401


def test_two_runs_on_one_thread_are_one_run_and_a_409_on_any_instance(cluster: Deployment) -> None:
    """Aegra ignores multitask_strategy: the guard holds the thread across instances."""
    import threading

    with running(create_app(Script(prompt_seconds=0.3))) as endpoint:
        slow = cluster.start_instance("slow-model", extra_env={"LONGDOC_BASE_URL": f"{endpoint}/v1"})
        a, b = client(slow), client(cluster.instances[1])
        doc_id = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"text": FALCON})["doc_id"]
        thread = a.threads.create()["thread_id"]
        turn = {"question": "Who manages procurement?", "doc_id": doc_id}
        first = a.runs.create(thread, "offload", input=turn)
        with pytest.raises(httpx.HTTPStatusError) as busy:
            b.runs.wait(thread, "offload", input={"question": "And the budget?"})
        assert busy.value.response.status_code == 409 and "one run at a time" in busy.value.response.text
        queued: list[Any] = []
        waiter = threading.Thread(
            target=lambda: queued.append(
                b.runs.wait(thread, "offload", input={"question": "And the budget?"}, multitask_strategy="enqueue")
            )
        )
        waiter.start()
        a.runs.join(thread, first["run_id"])
        waiter.join(timeout=120)
    assert queued and queued[0]["turn"] == 2
    assert [m["type"] for m in a.threads.get_state(thread)["values"]["messages"]] == ["human", "ai", "human", "ai"]


def test_a_tenant_forgets_its_own_thread_and_document_with_aegras_records(cluster: Deployment) -> None:
    import psycopg

    a = client(cluster.instances[0])
    text = FALCON + "\n\nThe 5521-EGRET-CLOVER shelf holds the spare pumps."
    doc_id = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"text": text})["doc_id"]
    thread = a.threads.create()["thread_id"]
    a.runs.wait(thread, "offload", input={"question": "Where is the 8820-HERON-BASIN valve?", "doc_id": doc_id})
    url = cluster.instances[1].url
    as_a, as_b = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
    assert httpx.post(f"{url}/forget", json={"thread_id": thread}, headers=as_b, timeout=60).status_code == 404
    gone = httpx.post(f"{url}/forget", json={"thread_id": thread}, headers=as_a, timeout=60)
    assert gone.status_code == 200, gone.text
    assert gone.json()["threads"] == [thread] and gone.json()["checkpoints"] > 0 and gone.json()["records"] > 0
    with psycopg.connect(cluster.postgres_url, autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs", "runs", "thread"):
            rows = conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", (thread,)).fetchone()
            assert rows == (0,), table
        events = conn.execute("SELECT count(*) FROM run_events WHERE data::text LIKE '%%8820-HERON%%'").fetchone()
        assert events == (0,)
    assert httpx.post(f"{url}/forget", json={"thread_id": thread}, headers=as_a, timeout=60).status_code == 404
    dropped = httpx.post(f"{url}/forget", json={"doc_id": doc_id}, headers=as_a, timeout=60)
    assert dropped.status_code == 200 and dropped.json()["documents"] == [doc_id], dropped.text
    assert httpx.post(f"{url}/forget", json={"doc_id": doc_id}, headers=as_a, timeout=60).status_code == 404
    after = a.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        a.runs.wait(after, "chain", input={"question": "Where?", "doc_id": doc_id})
    assert refused.value.response.status_code == 400 and "not ingested" in refused.value.response.text
    run = a.runs.list(after)[0]
    assert run["status"] == "error" and "not ingested" in run["error_message"], run


SECRET = "The vault code of the annex is 6630-KESTREL-MOSS."
MEMBERS = (
    "# Harbour Office\n\nThe harbour office keeps the tide tables. Its clerk opens at eight.\n",
    f"# Quillfeather Annex\n\n{SECRET} The annex stores the old ledgers.\n",
    "# Depot\n\nThe depot repairs the cranes. The code of the depot gate is shared by its crew.\n",
)


def _postgres_holding(url: str, needle: str) -> list[str]:
    """``table.column`` of every column of the deployment's database with a row holding ``needle``."""
    import psycopg

    found = []
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = 'public'"
        ).fetchall()
        for table, column, kind in columns:
            test = f'position(%s::bytea in "{column}") > 0' if kind == "bytea" else f'"{column}"::text LIKE %s'
            value = needle.encode() if kind == "bytea" else f"%{needle}%"
            if conn.execute(f'SELECT count(*) FROM "{table}" WHERE {test}', (value,)).fetchone() != (0,):
                found.append(f"{table}.{column}")
    return sorted(found)


@pytest.mark.parametrize("shape", ["document", "collection"])
def test_forgetting_a_document_read_alone_or_in_a_collection_leaves_no_copy_in_postgresql(
    cluster: Deployment, model: tuple[Script, str], shape: str
) -> None:
    """Ask, summarize and chat over one member or the three, then forget that member: no thread state, run
    record or stream event keeps its text (the answers are made from the prompts, so they quote it)."""
    script = model[0]
    script.writer = workflow_replies
    try:
        a = client(cluster.instances[0])
        secret = SECRET.replace("6630", str(6630 + (shape == "collection")))
        texts = [text.replace(SECRET, secret) for text in MEMBERS]
        ingests = [a.threads.create()["thread_id"] for _ in texts]
        ids = [a.runs.wait(t, "ingest", input={"text": text})["doc_id"] for t, text in zip(ingests, texts, strict=True)]
        named = {"doc_ids": ids} if shape == "collection" else {"doc_id": ids[1]}
        question = "What is the vault code of the annex?"
        threads = [ingests[1]]  # its run record holds the text it was sent
        for assistant, body in (
            ("chain", {"question": question}),
            ("summarize", {"query": question, "length": 10}),
            ("offload", {"question": question}),
        ):
            threads.append(a.threads.create()["thread_id"])
            a.runs.wait(threads[-1], assistant, input={**body, **named})
        needle = secret.split(" is ")[1][:12]
        held = _postgres_holding(cluster.postgres_url, needle)
        assert any(h.startswith("checkpoint") for h in held) and "runs.output" in held, held
        dropped = httpx.post(
            f"{cluster.instances[1].url}/forget", json={"doc_id": ids[1]}, headers={"X-API-Key": "key-a"}, timeout=120
        )
        assert dropped.status_code == 200, dropped.text
        assert sorted(dropped.json()["threads"]) == sorted(threads) and dropped.json()["documents"] == [ids[1]]
        assert _postgres_holding(cluster.postgres_url, needle) == []
        if shape == "collection":  # the other members and their own threads stay
            assert a.runs.wait(a.threads.create()["thread_id"], "chain", input={"question": "Who?", "doc_id": ids[0]})
    finally:
        script.writer = None


def _edit(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with a later modification time (a file system with coarse times sees the edit)."""
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))


def _until_removed(url: str, key: str, doc_id: str) -> httpx.Response:
    """A run naming ``doc_id`` on a new thread, repeated until the earlier version is removed (410) or 60 s pass.

    It is removed once the run that ingested the new version has given its thread back, after its answer is sent.
    """
    headers, deadline = {"X-API-Key": key}, time.monotonic() + 60
    while True:
        thread = httpx.post(f"{url}/threads", json={}, headers=headers, timeout=60).json()["thread_id"]
        body = {"assistant_id": "chain", "input": {"question": "Who?", "doc_id": doc_id}}
        probe = httpx.post(f"{url}/threads/{thread}/runs/wait", json=body, headers=headers, timeout=120)
        if probe.status_code != 200 or time.monotonic() > deadline:
            return probe
        time.sleep(0.5)


def test_a_changed_file_supersedes_its_earlier_version_after_the_run_that_ingests_it(
    cluster: Deployment, ingest_root: Path
) -> None:
    """The earlier version goes, GET /documents no longer lists it, and the thread that read it is told the current
    version (410) and goes on with it."""
    a, url = client(cluster.instances[0]), cluster.instances[0].url
    note = ingest_root / "vault.md"
    note.write_text("# Vault\n\nThe 7731-OSPREY-LOCK code opens the vault.\n", encoding="utf-8")
    first = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"path": "vault.md"})
    chat = a.threads.create()["thread_id"]
    a.runs.wait(chat, "offload", input={"question": "What opens the vault?", "doc_id": first["doc_id"]})
    _edit(note, "# Vault\n\nThe vault is empty now.\n")
    again = a.runs.wait(a.threads.create()["thread_id"], "ingest", input={"path": "vault.md"})
    assert again["superseded"] == [first["doc_id"]], again
    listed = httpx.get(f"{url}/documents", headers={"X-API-Key": "key-a"}, timeout=60).json()["documents"]
    assert again["doc_id"] in {d["doc_id"] for d in listed} and first["doc_id"] not in {d["doc_id"] for d in listed}
    probe = _until_removed(url, "key-a", first["doc_id"])
    assert probe.status_code == 410 and again["doc_id"] in probe.text, probe.text
    assert httpx.get(f"{url}/threads/{chat}", headers={"X-API-Key": "key-a"}, timeout=60).status_code == 200
    with pytest.raises(httpx.HTTPStatusError) as told:
        a.runs.wait(chat, "offload", input={"question": "And now?"})
    assert told.value.response.status_code == 410 and "'vault.md'" in told.value.response.text
    named = a.runs.wait(chat, "offload", input={"question": "And now?", "doc_id": again["doc_id"]})
    assert named["doc_id"] == again["doc_id"] and named["answer"]


def test_a_text_upload_and_its_threads_outlive_another_tenants_supersede(
    cluster: Deployment, ingest_root: Path
) -> None:
    """Tenants c and d share a namespace: d's text upload has the content of c's file, which changes."""
    c, d = client(cluster.instances[0], "key-c"), client(cluster.instances[0], "key-d")
    plan, url = "# Plan\n\nBob Chen manages procurement. Field trials start in June.\n", cluster.instances[0].url
    (ingest_root / "shared-plan.md").write_text(plan, encoding="utf-8")
    filed = c.runs.wait(c.threads.create()["thread_id"], "ingest", input={"path": "shared-plan.md"})["doc_id"]
    uploaded = d.runs.wait(d.threads.create()["thread_id"], "ingest", input={"text": plan})["doc_id"]
    assert uploaded == filed
    chat = d.threads.create()["thread_id"]
    d.runs.wait(chat, "offload", input={"question": "Who manages procurement?", "doc_id": uploaded})
    _edit(ingest_root / "shared-plan.md", "# Plan\n\nAda Park manages procurement now.\n")
    again = c.runs.wait(c.threads.create()["thread_id"], "ingest", input={"path": "shared-plan.md"})
    assert again["superseded"] == [filed], again
    listed = httpx.get(f"{url}/documents", headers={"X-API-Key": "key-d"}, timeout=60).json()["documents"]
    assert uploaded in {doc["doc_id"] for doc in listed}  # the upload owns it: not queued for removal
    turn = d.runs.wait(chat, "offload", input={"question": "When do the trials start?"})
    assert turn["doc_id"] == uploaded and turn["turn"] == 2


def test_a_forget_in_a_shared_namespace_removes_every_tenants_threads(cluster: Deployment) -> None:
    """d forgets a document c's thread read too: no copy in PostgreSQL, and c's thread says why (410)."""
    c, d = client(cluster.instances[0], "key-c"), client(cluster.instances[0], "key-d")
    text = "# Ledger\n\nThe 4419-PLOVER-GATE code opens the shared store.\n"
    doc = d.runs.wait(d.threads.create()["thread_id"], "ingest", input={"text": text})["doc_id"]
    threads = {}
    for name, tenant in (("d", d), ("c", c)):
        threads[name] = tenant.threads.create()["thread_id"]
        tenant.runs.wait(threads[name], "offload", input={"question": "Which code opens the store?", "doc_id": doc})
    assert _postgres_holding(cluster.postgres_url, "4419-PLOVER")
    gone = httpx.post(
        f"{cluster.instances[0].url}/forget", json={"doc_id": doc}, headers={"X-API-Key": "key-d"}, timeout=120
    )
    assert gone.status_code == 200, gone.text
    assert _postgres_holding(cluster.postgres_url, "4419-PLOVER") == []
    assert threads["d"] in gone.json()["threads"] and threads["c"] not in gone.json()["threads"]
    assert gone.json()["others"] == 1
    with pytest.raises(httpx.HTTPStatusError) as told:
        c.runs.wait(threads["c"], "offload", input={"question": "And the store?"})
    assert told.value.response.status_code == 410 and "forgotten" in told.value.response.text


def test_a_failing_stream_ends_with_an_error_event_and_a_whole_body(cluster: Deployment) -> None:
    with running(create_app(Script(fault="error_500"))) as endpoint:
        failing = cluster.start_instance(
            "failing-model", extra_env={"LONGDOC_BASE_URL": f"{endpoint}/v1", "LONGDOC_MAX_RETRIES": "0"}
        )
        c = client(failing)
        doc_id = c.runs.wait(c.threads.create()["thread_id"], "ingest", input={"text": FALCON})["doc_id"]
        thread = c.threads.create()["thread_id"]
        body = {"assistant_id": "chain", "input": {"question": "Who manages procurement?", "doc_id": doc_id}}
        with httpx.stream(
            "POST",
            f"{failing.url}/threads/{thread}/runs/stream",
            json=body,
            headers={"X-API-Key": "key-a"},
            timeout=120,
        ) as reply:
            text = "".join(reply.iter_text())  # a body cut half-way would raise here
    events = [block.split("\n", 1)[0] for block in text.replace("\r\n", "\n").split("\n\n") if block.strip()]
    # Aegra names the failure in an error event, then ends the stream.
    assert events[-2:] == ["event: error", "event: end"] or events[-1] == "event: error", text[-1000:]
    assert "model endpoint" in text and "Traceback" not in text
