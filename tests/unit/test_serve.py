from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from doubles.replies import offload_chat_model as fake_chat_model
from surfaces.serve import create_app

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


@pytest.fixture
def client() -> TestClient:
    with TestClient(create_app(chat_model=fake_chat_model())) as c:
        yield c


def test_health_lists_workflows(client: TestClient) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok" and "ingest" in body["workflows"]


def test_ingest_route_invokes_the_graph(client: TestClient) -> None:
    payload = {"input": {"text": "Otters hold hands while sleeping."}, "config": {"configurable": {"namespace": "api"}}}
    first = client.post("/ingest/invoke", json=payload)
    assert first.status_code == 200, first.text
    out = first.json()["output"]
    assert out["chunks"] == 1 and out["cached"] is False
    again = client.post("/ingest/invoke", json=payload).json()["output"]
    assert again["cached"] is True and again["doc_id"] == out["doc_id"]


def test_bad_input_is_a_clear_client_error(client: TestClient) -> None:
    response = client.post("/ingest/invoke", json={"input": {"text": "  "}})
    assert response.status_code == 400
    assert "empty" in response.json()["detail"]
    assert client.get("/health").status_code == 200


def test_api_key_is_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_SERVER_API_KEY", "s3cret")
    with TestClient(create_app()) as c:
        payload = {"input": {"text": "Key protected text."}}
        assert c.post("/ingest/invoke", json=payload).status_code == 401
        assert c.post("/ingest/invoke", json=payload, headers={"X-API-Key": "wrong"}).status_code == 401
        assert c.post("/ingest/invoke", json=payload, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert c.post("/ingest/invoke", json=payload, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/health").status_code == 200


def test_request_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_REQUEST_BYTES", "200")
    with TestClient(create_app()) as c:
        response = c.post("/ingest/invoke", json={"input": {"text": "x" * 500}})
        assert response.status_code == 413


@pytest.fixture
def falcon_id(client: TestClient) -> str:
    text = FALCON.read_text(encoding="utf-8")
    response = client.post("/ingest/invoke", json={"input": {"text": text, "title": "Project Falcon"}})
    assert response.status_code == 200, response.text
    return response.json()["output"]["doc_id"]


def _turn(client: TestClient, doc_id: str, thread: str | None) -> int:
    body: dict = {"input": {"question": "Who manages procurement?", "doc_id": doc_id}}
    if thread is not None:
        body["config"] = {"configurable": {"thread_id": thread}}
    response = client.post("/offload/invoke", json=body)
    assert response.status_code == 200, response.text
    return response.json()["output"]["turn"]


def test_thread_id_resumes_a_checkpointed_session_across_requests(client: TestClient, falcon_id: str) -> None:
    assert [_turn(client, falcon_id, "s1"), _turn(client, falcon_id, "s1")] == [1, 2]
    assert _turn(client, falcon_id, "s2") == 1
    assert _turn(client, falcon_id, None) == 1 and _turn(client, falcon_id, None) == 1  # fresh threads
    assert _turn(client, falcon_id, "s1") == 3
    schema = client.get("/offload/config_schema").json()
    assert "thread_id" in json.dumps(schema)


def test_batch_runs_each_input_on_its_own_thread(client: TestClient, falcon_id: str) -> None:
    question = {"question": "Who manages procurement?", "doc_id": falcon_id}
    own = client.post(
        "/offload/batch",
        json={
            "inputs": [question, question],
            "config": [{"configurable": {"thread_id": "b1"}}, {"configurable": {"thread_id": "b2"}}],
        },
    )
    assert own.status_code == 200, own.text
    assert [o["turn"] for o in own.json()["output"]] == [1, 1]
    assert _turn(client, falcon_id, "b1") == 2 and _turn(client, falcon_id, "b2") == 2
    for config in ({}, {"configurable": {"thread_id": "shared"}}):
        response = client.post("/offload/batch", json={"inputs": [question, question], "config": config})
        assert response.status_code == 200, response.text
        assert [o["turn"] for o in response.json()["output"]] == [1, 1]
    assert _turn(client, falcon_id, "shared-1") == 2


def test_batch_runs_each_input_with_the_settings_of_its_own_config(client: TestClient, falcon_id: str) -> None:
    question = {"question": "Who manages procurement?", "doc_id": falcon_id}
    configs = [
        {"configurable": {"thread_id": "p1", "policy": "last_k", "keep_turns": 2}},
        {"configurable": {"thread_id": "p2", "policy": "full"}},
    ]
    response = client.post("/offload/batch", json={"inputs": [question, question], "config": configs})
    assert response.status_code == 200, response.text
    assert [o["policy"] for o in response.json()["output"]] == ["last_k", "full"]


def test_a_streamed_run_is_answered_by_the_app_s_chat_model(falcon_id: str) -> None:
    model = fake_chat_model()
    body = {"input": {"question": "Who manages procurement?", "doc_id": falcon_id}}
    with TestClient(create_app(chat_model=model)) as c:
        response = c.post("/offload/stream", json=body)
    assert response.status_code == 200, response.text
    assert "event: end" in response.text and "event: error" not in response.text
    # the streamed run's worker threads used the injected model: the canvas, the reading's worker, the answer and
    # the offloader
    assert len(model.calls) == 4
