"""Clients that leave mid-run, on the servers themselves: ``langgraph dev`` (every run route, its bound on model
calls, a network peer naming ``localhost``) and one Aegra instance with PostgreSQL (MCP and A2A).

The cases are the reliability benchmark's ``leave`` suite (:mod:`bench.reliability_leave`): each request is sent
over a socket of its own and closed while the run's first model call is in flight, as the scripted endpoint's
request log shows; the model calls counted are those that reached the endpoint after the client left, once the
server has no busy thread (a bounded wait).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.reliability_leave import CALL_SECONDS, aegra_rows, dev_rows
from deploy.cluster import chroma_binary, postgres_bindir
from doubles.endpoint import Script, create_app, running


def _short(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if not row["held"]]


def test_langgraph_dev_stops_the_runs_of_clients_that_leave_and_bounds_each_run(tmp_path: Path) -> None:
    script = Script(prompt_seconds=CALL_SECONDS)
    with running(create_app(script)) as endpoint:
        rows = dev_rows(tmp_path, script, endpoint)
    cases = [row["case"] for row in rows]
    assert {"dev /runs/wait summarize", "dev /runs/stream summarize", "dev /mcp summarize"} <= set(cases)
    assert {"dev /a2a SendMessage", "dev /a2a SendStreamingMessage", "dev /runs/wait, bound of 4"} <= set(cases)
    for row in rows:
        if "calls_before_leaving" in row:
            assert row["calls_before_leaving"] >= 1 and row["calls_after_leaving"] == 0, row
        if "calls" in row:
            assert 1 <= row["calls"] <= 4 and row["names_the_bound"], row
    peer = next(row for row in rows if "network peer" in row["case"])
    assert (peer["network_peer_status"], peer["loopback_status"]) == (403, 200)
    assert _short(rows) == []


@pytest.mark.skipif(
    postgres_bindir() is None or chroma_binary() is None,
    reason="PostgreSQL server binaries or the chroma command are not installed (.ci/system-deps, make install)",
)
def test_aegra_stops_the_runs_of_mcp_and_a2a_callers_that_leave() -> None:
    script = Script(prompt_seconds=CALL_SECONDS)
    with running(create_app(script)) as endpoint:
        rows = aegra_rows(script, endpoint)
    assert [row["case"] for row in rows] == [
        "Aegra /mcp summarize (refine)",
        "Aegra /a2a SendMessage",
        "Aegra /a2a SendStreamingMessage",
    ]
    for row in rows:
        assert row["calls_before_leaving"] >= 1 and row["calls_after_leaving"] == 0 and row["run_ended"], row
