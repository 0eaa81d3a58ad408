"""bench.reader: passages of the dev data, and the summary's paired ratios and shares of the int8 peak."""

from __future__ import annotations

import pytest

from bench.qa_data import Paragraph, QAItem
from bench.reader import CANDIDATES, main, passages, summary


def _row(candidate: str, item: str, round_no: int, read: float, write: float, reply: str = "x") -> dict[str, object]:
    return {
        "candidate": candidate,
        "item": item,
        "round": round_no,
        "prompt_tokens": 1500,
        "read_tps": read,
        "write_tps": write,
        "reply": reply,
        "system_info": f"{candidate} info",
    }


def test_the_summary_pairs_each_reply_with_the_first_candidates_on_the_same_passage() -> None:
    rows = [
        _row("xllamacpp", "a", 0, 60.0, 20.0),
        _row("native", "a", 0, 90.0, 20.0),
        _row("xllamacpp", "b", 0, 40.0, 10.0),
        _row("native", "b", 0, 48.0, 12.0, reply="y"),
        _row("native", "c", 0, 500.0, 50.0),  # no xllamacpp reply for c: not paired
    ]
    out = summary(rows, ["xllamacpp", "native"], peak=600.0, gflop_per_token=3.0)
    native = out["native"]
    assert native["read_ratio"] == pytest.approx(1.35)  # median of 1.5 and 1.2, not the medians' ratio
    assert native["write_ratio"] == pytest.approx(1.1)
    assert native["replies"] == 3 and native["read_tps"] == 90.0
    assert native["share_of_int8_peak"] == pytest.approx(90.0 * 3.0 / 600.0)
    assert native["same_reply_as_first"] == 0.5 and native["system_info"] == "native info"
    assert out["xllamacpp"]["read_ratio"] == 1.0


def test_a_passage_puts_the_items_own_paragraphs_first_and_is_cut() -> None:
    item = QAItem(
        id="q1",
        source="hotpotqa",
        question="Who?",
        answers=["A"],
        paragraphs=[Paragraph("t1", "other " * 20, False), Paragraph("t2", "gold text", True)],
    )
    (passage,) = passages([item], chars=30)
    assert passage["passage"].startswith("gold text") and len(passage["passage"]) == 30
    assert passage["question"] == "Who?" and passage["item"] == "q1"


def test_an_unknown_candidate_is_refused_before_anything_starts() -> None:
    assert "native-q4_0" in CANDIDATES and CANDIDATES["native-q4_0"].layout == "Q4_0"
    with pytest.raises(SystemExit, match="unknown candidates"):
        main(["--candidates", "xllamacpp,fastest", "--data", "../shared/data/qa_long"])
