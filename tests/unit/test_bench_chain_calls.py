from __future__ import annotations

import pytest

from bench.chain_calls import record_requests, replay, totals
from bench.qa_data import Paragraph, QAItem
from doubles import endpoint as fake_endpoint

pytestmark = pytest.mark.enable_socket  # loopback only: the scripted endpoint


def test_the_chain_s_requests_are_recorded_and_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_EMBEDDER", "hash")
    monkeypatch.setenv("LONGDOC_MODEL", "scripted")
    paragraphs = [
        Paragraph(f"Title {i}", f"Paragraph {i} says that item {i} costs {i * 10} euros in all.", i == 1)
        for i in range(6)
    ]
    item = QAItem(
        id="q0", source="test", question="What does item 1 cost?", answers=["10 euros"], paragraphs=paragraphs
    )
    script = fake_endpoint.Script(fault="ok")
    with fake_endpoint.running(fake_endpoint.create_app(script)) as url:
        monkeypatch.setenv("LONGDOC_BASE_URL", url + "/v1")
        bodies = record_requests(item, "hash")
        # every worker call and the manager's went over HTTP and was recorded
        assert len(bodies) >= 2 and all(body["messages"] for body in bodies)
        assert any("manager of a chain" in str(body["messages"][0]["content"]) for body in bodies)
        calls = replay(url + "/v1", bodies, cache_prompt=False)
    assert len(calls) == len(bodies) and all(c["seconds"] > 0 for c in calls)
    summed = totals(calls)
    assert summed["calls"] == len(bodies) and summed["seconds"] == round(sum(c["seconds"] for c in calls), 2)
