from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import journal
from bench.chain_long import journal_key
from bench.chain_timing import parse_args, run_timing, summarise_timing
from bench.qa_data import Paragraph, QAItem

ITEMS = [
    QAItem(
        id=f"q{n}",
        source="test",
        question=f"Which river flows through city {n}?",
        answers=[f"River{n}"],
        paragraphs=[Paragraph(f"City {n}", f"City {n} lies on River{n}.", True), Paragraph("Other", "Nothing.", False)],
    )
    for n in range(2)
]


class Runner:
    """A scripted method run: answers ``River<n>`` for the chain, ``unknown`` for top-k, in fixed seconds."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, method: str, doc_id: str, question: str) -> tuple[str, dict[str, Any], float]:
        self.calls.append((method, question))
        n = question.split("city ")[1].rstrip("?")
        pred = f"River{n}" if method == "anytime" else "unknown"
        usage = {"worker": {"input": 900, "output": 40, "calls": 2, "cached": 0}}
        return pred, {"usage": usage}, 10.0 if method == "anytime" else 4.0


def test_each_sitting_times_every_question_once_and_checks_the_journalled_answers(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    for method, pred in (("anytime", "River0"), ("topk", "River0")):
        journal.append(answers, {"key": journal_key("q0", "orig", 3000, method), "prediction": pred})
    timings = tmp_path / "timing.jsonl"
    runner = Runner()
    kwargs: dict[str, Any] = {"budget": 3000, "embedder": "hash", "runner": runner}
    rows = run_timing(ITEMS, ["anytime", "topk"], timings, answers, run="one", **kwargs)
    assert len(rows) == 4 and len(runner.calls) == 4
    same = {(r["item"], r["method"]): r["same_as_journal"] for r in rows}
    assert same == {("q0", "anytime"): True, ("q0", "topk"): False, ("q1", "anytime"): None, ("q1", "topk"): None}
    assert all(r["input_tokens"] == 900 and r["calls"] == 2 for r in rows)
    again = run_timing(ITEMS, ["anytime", "topk"], timings, answers, run="one", **kwargs)
    assert again == rows and len(runner.calls) == 4  # resumed from the journal
    run_timing(ITEMS[:1], ["anytime"], timings, answers, run="two", **kwargs)
    assert len(runner.calls) == 5  # a new sitting times the question again


def test_the_summary_pairs_methods_on_the_questions_both_timed() -> None:
    def row(item: str, method: str, seconds: float, **extra: Any) -> dict[str, Any]:
        base = {"item": item, "method": method, "seconds": seconds, "input_tokens": 100, "output_tokens": 10}
        return {**base, "calls": 1, "same_as_journal": True, "failed": None, "usage": {}, **extra}

    rows = [
        row("a", "anytime", 80.0),
        row("a", "topk", 40.0),
        row("b", "anytime", 90.0, same_as_journal=False),
        row("b", "topk", 30.0),
        row("c", "anytime", 100.0),
        row("c", "topk", 50.0),
        row("d", "anytime", 500.0),  # top-k never ran on d: left out of both
        row("e", "anytime", 1.0, usage={"manager": {"input": 9, "output": 1, "calls": 1, "cached": 1}}),
        row("e", "topk", 1.0),
    ]
    summary = summarise_timing(rows, ["anytime", "topk"])
    assert summary["anytime"]["items"] == 3 and summary["anytime"]["median_s"] == 90.0
    assert summary["anytime"]["same_as_journal"] == pytest.approx(2 / 3, abs=1e-3)
    assert summary["topk"]["median_s"] == 40.0
    assert summary["topk"]["median_ratio_to_anytime"] == 0.5  # of 0.5, 0.333 and 0.5
    assert summary["anytime"]["p90_s"] == pytest.approx(98.0)


def test_an_unknown_method_is_refused() -> None:
    with pytest.raises(SystemExit, match="unknown methods"):
        parse_args(["--data", "d", "--out", "o.json", "--run", "r", "--methods", "anytime,magic"])


def test_rows_score_the_answer_and_the_evidence_read(tmp_path: Path) -> None:
    runner = Runner()
    rows = run_timing(
        ITEMS,
        ["anytime", "topk"],
        tmp_path / "t.jsonl",
        tmp_path / "a.jsonl",
        run="one",
        budget=3000,
        embedder="hash",
        runner=runner,
    )
    scored = {(r["item"], r["method"]): (r["f1"], r["em"]) for r in rows}
    assert scored[("q0", "anytime")] == (1.0, 1.0) and scored[("q1", "topk")] == (0.0, 0.0)
    summary = summarise_timing(rows, ["anytime", "topk"])
    assert summary["anytime"]["f1"] == 1.0 and summary["topk"]["em"] == 0.0
    assert "median_read_s" not in summary["anytime"]  # the scripted runs report no server timings


def test_the_servers_own_reading_and_writing_times_are_summed_per_question() -> None:
    import httpx

    from bench.chain_timing import server_timings, server_totals

    def reply(request: httpx.Request) -> httpx.Response:
        timings = {"prompt_n": 900, "cache_n": 100, "prompt_ms": 12000.0, "predicted_n": 20, "predicted_ms": 1500.0}
        return httpx.Response(200, json={"choices": [], "timings": timings})

    client = httpx.Client(transport=httpx.MockTransport(reply))
    with server_timings() as calls:
        for _ in range(2):
            client.post("http://127.0.0.1:9/v1/chat/completions", json={})
        client.post("http://127.0.0.1:9/v1/embeddings", json={})
    client.post("http://127.0.0.1:9/v1/chat/completions", json={})  # after the block: not counted
    totals = server_totals(calls)
    assert totals == {
        "replies": 2,
        "prompt_read": 1800.0,
        "prompt_reused": 200.0,
        "prompt_ms": 24000.0,
        "written": 40.0,
        "write_ms": 3000.0,
    }


def test_a_streamed_reply_is_passed_on_whole_and_its_last_event_gives_the_timings() -> None:
    import httpx

    from bench.chain_timing import server_timings

    events = [
        b'data: {"choices": [{"delta": {"content": "Ri"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "ver"}}], "timings": {"prompt_n": 5, "prompt_ms": 70.0, '
        b'"predicted_n": 2, "predicted_ms": 90.0}}\n\n',
        b"data: [DONE]\n\n",
    ]

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"".join(events)))

    client = httpx.Client(transport=httpx.MockTransport(reply))
    with server_timings() as calls:
        request = client.build_request("POST", "http://127.0.0.1:9/v1/chat/completions", json={})
        response = client.send(request, stream=True)
        body = b"".join(response.iter_bytes())
        early = client.send(request, stream=True)  # read up to the timings, then closed, as the OpenAI client does
        for chunk in early.iter_raw(chunk_size=len(events[0]) + len(events[1])):
            if b"timings" in chunk:
                break
        early.close()
    assert body == b"".join(events) and len(calls) == 2 and calls[0] == calls[1]
    calls.pop()
    assert calls == [{"prompt_read": 5.0, "prompt_reused": 0.0, "prompt_ms": 70.0, "written": 2.0, "write_ms": 90.0}]


def test_each_timed_run_starts_on_freshly_started_servers_of_the_models_it_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.chain_timing import fresh_servers
    from stores import local_model
    from stores.settings import BUNDLED_MODEL_NAME, SMALL_MODEL_NAME

    events: list[str] = []
    monkeypatch.setattr(local_model, "stop_server", lambda name=None: events.append("stop"))
    monkeypatch.setattr(local_model, "ensure_server", lambda name=None: events.append(f"start {name}"))
    monkeypatch.delenv("LONGDOC_BASE_URL", raising=False)
    fresh_servers("anytime-worker05")
    assert events == ["stop", f"start {SMALL_MODEL_NAME}", f"start {BUNDLED_MODEL_NAME}"]
    events.clear()
    fresh_servers("topk")
    assert events == ["stop", f"start {BUNDLED_MODEL_NAME}", f"start {BUNDLED_MODEL_NAME}"]
