"""The serving benchmark's bookkeeping: the load plan, the figures of a phase, and what falls short."""

from __future__ import annotations

from typing import Any

from bench.serve import OPS, failures, percentile, plan, summary


def test_every_client_runs_the_whole_mix_from_its_own_starting_point() -> None:
    ops = plan(clients=4, rounds=2)
    assert len(ops) == 4 and all(len(o) == 2 * len(OPS) for o in ops)
    assert all(sorted(o) == sorted(list(OPS) * 2) for o in ops)
    assert [o[0] for o in ops] == ["ingest", "ask", "chat", "ingest"]


def test_percentiles_take_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 50) == 10.0
    assert percentile(values, 95) == 19.0
    assert percentile([3.0], 95) == 3.0


def test_a_phase_counts_runs_errors_and_throughput() -> None:
    row = summary([0.5, 1.0, 1.5, 2.0], ["ask: 503"], seconds=2.0)
    assert (row["runs"], row["errors"], row["runs_per_s"], row["p50_s"], row["p95_s"]) == (5, 1, 2.0, 1.25, 2.0)
    assert summary([], ["x"], 1.0)["p50_s"] is None


def _row(instances: int, clients: int, rps: float, **extra: Any) -> dict[str, Any]:
    base = {"server": "aegra", "instances": instances, "clients": clients, "runs": 10, "errors": 0}
    return {**base, "runs_per_s": rps, "recorded": {"success": 10}, **extra}


def test_errors_lost_runs_and_no_gain_from_a_second_instance_fall_short() -> None:
    good = {"settings": {"clients": [1, 32]}, "results": [_row(1, 32, 5.0), _row(2, 32, 8.0)]}
    assert failures(good) == []
    bad = {
        "settings": {"clients": [1, 32]},
        "results": [
            _row(1, 32, 5.0, errors=2),
            _row(2, 32, 4.0, recorded={"success": 9, "error": 2}),
            {"server": "langserve", "instances": 1, "clients": 32, "runs": 10, "errors": 0, "runs_per_s": 3.0},
        ],
    }
    found = failures(bad)
    assert any("2 errors" in f for f in found)
    assert any("recorded" in f for f in found)
    assert any("not faster" in f for f in found)
