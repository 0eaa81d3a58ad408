"""The owners suite of ``bench.reliability``: it holds on this code, and a case that does not hold fails the run."""

from __future__ import annotations

from pathlib import Path

from bench import reliability
from bench.reliability_owners import owners, owners_failures


def test_the_owners_suite_holds(tmp_path: Path) -> None:
    out = owners(tmp_path)
    assert out["cases"] == 4 and out["held"] == 4, [r for r in out["rows"] if not r["held"]]
    by_case = {r["case"].split(",")[0]: r for r in out["rows"]}
    assert all(r.get("documents_lost", 0) == 0 and r.get("threads_lost", 0) == 0 for r in out["rows"])
    run = by_case["a run across another tenant's supersede"]
    assert run["stateless_run"] == 200 and run["next_turn"] == 410
    forget = by_case["a forget in a shared namespace leaves no tenant's copy and tells the other tenant's thread"]
    assert forget["checkpoint_rows_holding_before"] > 0 == forget["checkpoint_rows_holding"]
    assert owners_failures(out) == []


def test_an_owners_case_that_does_not_hold_fails_the_benchmark() -> None:
    short = {"cases": 2, "held": 1, "rows": [{"case": "kept", "held": True}, {"case": "lost", "held": False}]}
    assert reliability.failures({"owners": short}) == ["owners: did not hold: lost"]
    assert reliability.failures({"owners": {"cases": 0, "held": 0, "rows": []}}) == [
        "owners: did not hold: no case ran"
    ]
    assert reliability.failures({}) == []
