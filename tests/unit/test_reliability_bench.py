from __future__ import annotations

from pathlib import Path

import pytest

from bench import reliability, reliability_owners


def test_interrupted_chat_turns_resume_cleanly_without_repeated_calls() -> None:
    out = reliability.interruptions(3)
    assert out["interruptions"] == 3 and out["clean_resumes"] == 3 and out["repeated_calls"] == 0


def test_every_bad_input_gets_a_clear_one_line_error(tmp_path: Path) -> None:
    out = reliability.bad_inputs(tmp_path)
    unclear = [c for c in out["cases"] if not c["clear"]]
    assert out["tried"] >= 34 and not unclear, unclear
    cases = {c["case"] for c in out["cases"]}
    assert {"92 KB .docx of 30 MB XML", "NaN in configurable", "another tenant's thread id"} <= cases


def test_concurrent_requests_all_succeed() -> None:
    with reliability.MemorySampler(every=0.01) as memory:
        out = reliability.concurrency(8)
    assert out["requests"] == 8 and out["errors"] == 0, out["error_samples"]
    assert 0 < out["p50_s"] <= out["p95_s"]
    figures = memory.figures()
    assert 0 < figures["start"] <= figures["peak"] and figures["growth"] == round(figures["peak"] - figures["start"], 1)


def test_memory_is_measured_per_suite_not_as_the_process_lifetime_peak() -> None:
    hog = bytearray(200 * 1024 * 1024)  # a suite that held 200 MB, then let it go
    del hog
    with reliability.MemorySampler(every=0.01) as quiet:
        sum(range(10_000))
    assert quiet.figures()["growth"] < 50  # the lifetime peak (ru_maxrss) would say +200 MB


def test_tenants_are_kept_apart_and_one_thread_runs_one_turn_at_a_time() -> None:
    out = reliability.tenants()
    assert out["cases"] == out["held"] == 4, out["rows"]


@pytest.mark.enable_socket
def test_every_caller_budget_is_refused_and_blobs_make_bounded_requests() -> None:
    out = reliability.budgets()
    assert out["settings_tried"] > 50 and out["refused"] == out["settings_tried"], [
        r for r in out["rows"] if r["status"] != 400
    ]
    assert out["blob_requests"] > 0 and out["oversized_requests"] == 0 and out["slowest_refusal_seconds"] < 5


def test_main_writes_the_report(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(reliability, "faults", lambda: {"injected": 0, "runs": []})
    killed = {"kills": 1, "clean_resumes": 1, "repeated_calls": 0, "runs": []}
    monkeypatch.setattr(reliability, "kills", lambda points, folder: killed)
    index = {
        "rechunk_rounds": 1,
        "consistent_rounds": 1,
        "kills": 4,
        "whole_after_kill": 4,
        "clean_after_next_ingest": 4,
    }
    monkeypatch.setattr(reliability, "index_integrity", lambda folder, rounds: index)
    kept = {
        "requests_ok": 3,
        "refused_status": [400, 400],
        "forget_status": [200, 200, 404],
        "leaks": 0,
        "left_after_forget": 0,
    }
    monkeypatch.setattr(reliability, "retention", lambda folder: kept)
    held = {"cases": 1, "held": 1, "rows": [{"case": "c", "held": True}]}
    monkeypatch.setattr(reliability, "tenants", lambda: held)
    monkeypatch.setattr(reliability, "dev_server", lambda folder: held)
    monkeypatch.setattr(reliability, "door", lambda: held)
    monkeypatch.setattr(reliability, "door_limits", lambda folder: held)
    spent = {"settings_tried": 1, "refused": 1, "oversized_requests": 0, "slowest_refusal_seconds": 0.1}
    monkeypatch.setattr(reliability, "budgets", lambda: spent)
    monkeypatch.setattr(reliability, "work_bounds", lambda folder: {})
    monkeypatch.setattr(reliability, "leave", lambda folder: held)
    monkeypatch.setattr(reliability, "owners", lambda folder: held)
    out = tmp_path / "reliability.json"
    assert reliability.main(["--out", str(out), "--interruptions", "1", "--kills", "1", "--concurrency", "2"]) == 0
    import json

    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report) == {
        "faults",
        "interruptions",
        "kills",
        "bad_inputs",
        "concurrency",
        "index",
        "retention",
        "tenants",
        "budgets",
        "dev_server",
        "work_bounds",
        "door",
        "leave",
        "owners",
        "door_limits",
        "seconds",
    }
    assert all({"seconds", "memory_mb"} <= set(part) for part in report.values() if isinstance(part, dict))
    assert reliability.main(["--out", str(out), "--suites", "index"]) == 0
    assert set(json.loads(out.read_text(encoding="utf-8"))) == {"index", "seconds"}


def test_index_integrity_and_retention_hold(tmp_path: Path) -> None:
    index = reliability.index_integrity(tmp_path, 1)
    assert index["consistent_rounds"] == 1 and index["kills"] == 4, index
    assert index["whole_after_kill"] == index["clean_after_next_ingest"] == 4, index["runs"]
    kept = reliability.retention(tmp_path)
    assert kept["requests_ok"] == 3 and kept["refused_status"] == [400, 400] and kept["checkpointed_rows"] > 0
    assert kept["forget_status"] == [200, 200, 404]
    assert kept["leaks"] == kept["left_after_forget"] == 0


def test_a_report_that_falls_short_is_a_failure() -> None:
    good = {
        "faults": {"injected": 27, "survived": 27, "failed_runs": 24, "clear_errors": 24},
        "interruptions": {"interruptions": 20, "clean_resumes": 20, "repeated_calls": 0},
        "kills": {"kills": 20, "clean_resumes": 20, "repeated_calls": 0},
        "bad_inputs": {"tried": 18, "clear_errors": 18},
        "concurrency": {"errors": 0},
    }
    assert reliability.failures(good) == []
    bad = {**good, "kills": {"kills": 20, "clean_resumes": 19, "repeated_calls": 2}, "concurrency": {"errors": 1}}
    assert reliability.failures(bad) == [
        "kills: 1 runs did not resume cleanly",
        "kills: 2 finished model calls were sent again",
        "concurrency: 1 requests failed",
    ]
    short = {**good, "kills": {"kills": 19, "clean_resumes": 19, "repeated_calls": 0, "runs": [{}] * 20}}
    assert reliability.failures(short) == ["kills: 1 processes finished before their kill came"]
    mixed = {**good, "index": {"rechunk_rounds": 2, "consistent_rounds": 1, "kills": 4, "whole_after_kill": 3}}
    assert reliability.failures(mixed) == [
        "index: 1 re-chunk rounds left a mixed index",
        "index: 1 killed re-indexes not whole after kill",
        "index: 4 killed re-indexes not clean after next ingest",
    ]
    retained = {"leaks": 2, "left_after_forget": 0, "refused_status": [400, 400], "requests_ok": 3}
    leaky = {**good, "retention": {**retained, "forget_status": [200, 200, 404]}}
    assert reliability.failures(leaky) == ["retention: 2 leaks, 0 left after forget"]
    unforgotten = {**good, "retention": {**retained, "leaks": 0, "forget_status": [200, 200, 200]}}
    assert reliability.failures(unforgotten) == ["retention: 0 leaks, 0 left after forget"]
    rows = [{"case": "two turns at once", "held": False}, {"case": "a session", "held": True}]
    mixed_up = {**good, "tenants": {"cases": 2, "held": 1, "rows": rows}}
    assert reliability.failures(mixed_up) == ["tenants: did not hold: two turns at once"]
    open_door = {**good, "dev_server": {"cases": 0, "held": 0, "error": "the langgraph CLI is not installed"}}
    assert reliability.failures(open_door) == ["dev_server: did not hold: the langgraph CLI is not installed"]
    spent = {"settings_tried": 66, "refused": 65, "oversized_requests": 2, "slowest_refusal_seconds": 0.2}
    assert reliability.failures({**good, "budgets": spent}) == [
        "budgets: 1 settings past their bound taken, 2 oversized model requests"
    ]
    stream = {**good["faults"], "failing_streams": 3, "streams_ended_with_an_error_event": 2}
    assert reliability.failures({**good, "faults": stream}) == [
        "faults: a failing stream did not end with an error event and a whole body"
    ]


def test_work_not_bounded_before_it_starts_is_a_failure() -> None:
    held = {
        "calls": {
            "rows": [
                {
                    "case": "map-reduce over the whole namespace",
                    "status": 413,
                    "calls": 0,
                    "bound": 200,
                    "names_the_bound": True,
                },
                {"case": "bounded run", "status": 413, "calls": 4, "bound": 4, "names_the_bound": True},
            ]
        },
        "disconnect": {
            "reached_the_third_call": True,
            "calls_started_after_leaving": 0,
            "last_call_start_after_leaving_s": 0.0,
        },
        "folder": {"files": 12000, "code": 2, "seconds": 6.9, "documents_left": 0},
    }
    assert reliability.failures({"work_bounds": held}) == []
    as_on_main = {
        "calls": {
            "rows": [
                {
                    "case": "map-reduce over the whole namespace",
                    "status": 200,
                    "calls": 268,
                    "bound": 200,
                    "names_the_bound": False,
                },
                {"case": "bounded run", "status": 200, "calls": 9, "bound": 4, "names_the_bound": False},
            ]
        },
        "disconnect": {
            "reached_the_third_call": True,
            "calls_started_after_leaving": 57,
            "last_call_start_after_leaving_s": 7.9,
        },
        "folder": {"files": 12000, "code": None, "seconds": 60.0, "documents_left": 700},
    }
    assert reliability.failures({"work_bounds": as_on_main}) == [
        "work bounds: map-reduce over the whole namespace answered 200 after 268 model calls",
        "work bounds: bounded run made 9 model calls past its bound of 4",
        "work bounds: 57 model calls started after the client left, the last 7.9 s later",
        "work bounds: a folder of 12000 files ended with code None after 60.0 s, 700 documents left behind",
    ]


def test_the_door_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the door's cases, short: a 2 MB HTML page over a bound of 10,000 elements, doc_ids of 20,000 ids."""
    monkeypatch.setenv("LONGDOC_MAX_HTML_ELEMENTS", "10000")
    with reliability.scratch_home():
        out = reliability.door(html_bytes=2_000_000, repeats=20_000)
    assert out["cases"] == 10 and out["held"] == 10, [r for r in out["rows"] if not r["held"]]
    html = out["rows"][0]
    assert html["status"] == 413 and "LONGDOC_MAX_HTML_ELEMENTS" in html["message"]
    assert {"seconds", "rss_rise_mb"} <= set(html)


def test_a_door_that_does_not_hold_is_a_failure() -> None:
    rows = [{"case": "2 MB HTML page", "held": False}, {"case": "malformed bodies on every route", "held": True}]
    assert reliability.failures({"door": {"cases": 2, "held": 1, "rows": rows}}) == [
        "door: did not hold: 2 MB HTML page"
    ]


def test_a_leave_case_that_does_not_hold_fails_the_reliability_benchmark() -> None:
    held = {"case": "dev /mcp summarize", "calls_before_leaving": 1, "calls_after_leaving": 0, "held": True}
    assert reliability.failures({"leave": {"cases": 1, "held": 1, "rows": [held]}}) == []
    late = {**held, "calls_after_leaving": 3, "held": False}
    assert reliability.failures({"leave": {"cases": 1, "held": 0, "rows": [late]}}) == [
        "leave: did not hold: dev /mcp summarize (calls_before_leaving 1, calls_after_leaving 3)"
    ]
    assert reliability.failures({"leave": {"cases": 0, "held": 0, "rows": []}}) == ["leave: no case ran"]


def test_the_owners_suite_holds(tmp_path: Path) -> None:
    out = reliability_owners.owners(tmp_path)
    assert out["cases"] == 4 and out["held"] == 4, [r for r in out["rows"] if not r["held"]]
    by_case = {r["case"].split(",")[0]: r for r in out["rows"]}
    assert all(r.get("documents_lost", 0) == 0 and r.get("threads_lost", 0) == 0 for r in out["rows"])
    run = by_case["a run across another tenant's supersede"]
    assert run["stateless_run"] == 200 and run["next_turn"] == 410
    forget = by_case["a forget in a shared namespace leaves no tenant's copy and tells the other tenant's thread"]
    assert forget["checkpoint_rows_holding_before"] > 0 == forget["checkpoint_rows_holding"]
    assert reliability_owners.owners_failures(out) == []


def test_an_owners_case_that_does_not_hold_fails_the_benchmark() -> None:
    short = {"cases": 2, "held": 1, "rows": [{"case": "kept", "held": True}, {"case": "lost", "held": False}]}
    assert reliability.failures({"owners": short}) == ["owners: did not hold: lost"]
    assert reliability.failures({"owners": {"cases": 0, "held": 0, "rows": []}}) == [
        "owners: did not hold: no case ran"
    ]
    assert reliability.failures({}) == []
