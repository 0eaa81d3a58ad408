"""The scale-out deployment over real backends: two Aegra instances, PostgreSQL and a Chroma server.

The model is the scripted OpenAI-compatible endpoint of :mod:`doubles.endpoint` (in this
process, on loopback); embeddings are the deterministic hash embedder. Each instance has its own
empty ``LONGDOC_HOME``, so whatever one sees of the other's work came through the databases.
"""

from __future__ import annotations

import json
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
from doubles.endpoint import Script, create_app, running
from tests.integration import clients

ROOT = Path(__file__).resolve().parents[2]
FALCON = (ROOT / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
KEYS = {"team-a": "key-a", "team-b": {"key": "key-b", "namespaces": ["team-b", "team-b-archive"]}}

pytestmark = pytest.mark.skipif(
    postgres_bindir() is None or chroma_binary() is None,
    reason="PostgreSQL server binaries or the chroma command are not installed (.ci/system-deps, make install)",
)


def _env(endpoint: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(
        {
            "LONGDOC_BASE_URL": f"{endpoint}/v1",
            "LONGDOC_MODEL": "scripted",
            "LONGDOC_EMBEDDER": "hash",
            "LONGDOC_SERVER_KEYS": json.dumps(KEYS),
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
def cluster(model: tuple[Script, str]) -> Iterator[Deployment]:
    with deployment(_env(model[1]), instances=2) as deploy:
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
        lambda: b.runs.wait(own, "chain", input={"doc_id": doc_id, "question": "Who buys?"}),
        lambda: b.runs.create(own, "chain", input={"doc_id": doc_id, "question": "Who buys?"}),
        lambda: b.runs.wait(own, "chain", command={"goto": None}),
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
    b.runs.wait(thread, "chain", input={"doc_id": doc_id, "question": "Who manages procurement?"})
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
        calls = [clients.ask_chain(doc_id), ("chain", {"question": "Who?"}), ("chain", {"question": 5})]
        session = clients.mcp_session(instance.url, calls, headers=key_a)
        assert list(session["tools"]) == ["ingest", "chain", "summarize", "offload", "route"]
        assert "messages" not in session["tools"]["offload"].inputSchema["properties"]
        good, missing, wrong = session["results"]
        assert not good.isError and good.structuredContent["answer"] and good.structuredContent["citations"]
        assert missing.isError and "no document" in clients.text_of(missing)
        assert wrong.isError and "validation" in clients.text_of(wrong)

    # Tenant B sees neither A's document nor A's namespace through its tools.
    foreign = clients.mcp_session(
        cluster.instances[1].url, [clients.ask_chain(doc_id), clients.ask_chain(doc_id, namespace="team-a")], key_b
    )
    unknown, refused = foreign["results"]
    assert unknown.isError and "is not ingested in namespace 'team-b'" in clients.text_of(unknown)
    assert refused.isError and "403" in clients.text_of(refused)

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
    card = httpx.get(f"{a}/a2a/offload/.well-known/agent-card.json", headers=key_a, timeout=30).json()
    assert card["skills"] and card["supportedInterfaces"][0]["url"] == "/a2a/offload"
    first = clients.a2a_send(
        a, "offload", [{"text": "Who manages procurement?"}, {"data": {"doc_id": doc_id}}], None, key_a
    )
    assert first["status"]["state"] == "TASK_STATE_COMPLETED", first
    second = clients.a2a_send(b, "offload", [{"text": "And the budget?"}], first["contextId"], key_a)
    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    state = c.threads.get_state(first["contextId"])["values"]
    assert state["turn"] == 2 and clients.artifact_text(second) == state["messages"][-1]["content"]
    assert clients.artifact_text(first) == state["messages"][1]["content"]

    # Another tenant cannot join the conversation (the answer an unknown one gets); a key-less call never reaches it.
    other = clients.a2a_send(b, "offload", [{"text": "What else?"}], first["contextId"], {"X-API-Key": "key-b"})
    nobody = clients.a2a_send(b, "offload", [{"text": "What else?"}], str(uuid.uuid4()), {"X-API-Key": "key-b"})
    refusal = other["status"]["message"]["parts"][0]["text"]
    assert other["status"]["state"] == nobody["status"]["state"] == "TASK_STATE_REJECTED" and "404" in refusal
    assert refusal.replace(first["contextId"], "ID") == nobody["status"]["message"]["parts"][0]["text"].replace(
        nobody["contextId"], "ID"
    )
    assert c.threads.get_state(first["contextId"])["values"]["turn"] == 2
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
    assert httpx.post(f"{a}/a2a/offload", json=body, timeout=30).status_code == 401
    unknown = httpx.post(f"{a}/a2a/chain", json=body, headers=key_a, timeout=30).json()
    assert unknown["error"]["code"] == -32602


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
        c.runs.wait(
            thread, "chain", input={"doc_id": doc_id, "question": "What was found?"}, context={"read_all": True}
        )
        calls = len(_worker_prompts(script, sent))
    run = c.runs.list(thread)[0]
    assert run["status"] == "error" and "LONGDOC_RUN_TIMEOUT" in run["error_message"], run
    # Each reply takes 0.5 s to begin and the chain's calls go one after another: in 2 s the run sends at most
    # 4 of them and the one its deadline cuts, however busy the machine (a busier one sends fewer).
    assert calls <= 2 / 0.5 + 1, calls
