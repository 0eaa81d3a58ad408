from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from graphs.serve import create_app


@pytest.fixture
def client() -> TestClient:
    with TestClient(create_app()) as c:
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
