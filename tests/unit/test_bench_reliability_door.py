"""The ``door_limits`` suite of the reliability benchmark (:mod:`bench.reliability_door`), short, and its verdict."""

from __future__ import annotations

import pytest

from bench import reliability, reliability_door


def test_the_attachment_bound_and_another_tenants_turns_are_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reliability_door, "MANY", 40)
    monkeypatch.setattr(reliability_door, "UPLOAD_BYTES", 40_000)
    many, other = reliability_door.langserve_rows()
    assert many["held"] and many["status"] == 413 and many["documents_added"] == 0
    assert "this one attaches 40" in many["reason"]
    assert other["upload_status"] == 200 and other["turns"] >= 1 and other["failed_turns"] == 0
    assert other["max_wait_seconds"] == max(other["waits"])


def test_a_door_limit_that_does_not_hold_is_a_failure() -> None:
    rows = [{"case": "langgraph dev: bodies that are not JSON on every route", "held": False}]
    report = {"door_limits": {"cases": 2, "held": 1, "rows": [*rows, {"case": "other", "held": True}]}}
    assert reliability.failures(report) == [
        "door_limits: did not hold: langgraph dev: bodies that are not JSON on every route"
    ]
    assert reliability.failures({"door_limits": {"cases": 2, "held": 2, "rows": []}}) == []
