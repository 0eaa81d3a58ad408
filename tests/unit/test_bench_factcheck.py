"""The fact-checker's planted-error benchmark (``bench.factcheck``): planting, alignment, scores, a scripted run."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage

from bench import factcheck as bench
from doubles.chat import ScriptedChatModel
from stores.models import use_chat_model


def _rng() -> random.Random:
    return random.Random("seed")


def test_each_kind_of_error_is_planted_or_said_not_to_apply() -> None:
    sentence = "Project Manager said the remote will cost 25 euros and was approved by Marketing."
    names = ["Project Manager", "Marketing", "Industrial Designer"]
    number = bench.plant("number", sentence, _rng(), names, [])
    assert number and number != sentence and "25" not in number and number.replace("25", "") != sentence
    name = bench.plant("name", sentence, _rng(), names, [])
    assert name and "Industrial Designer" in name and name != sentence
    assert bench.plant("negation", sentence, _rng(), names, []) == sentence.replace("will cost", "will not cost")
    assert bench.plant("negation", "They never agreed on it.", _rng(), names, []) == "They agreed on it."
    assert (
        bench.plant("negation", "The team decided on rubber.", _rng(), names, []) == "The team never decided on rubber."
    )
    assert bench.plant("other_meeting", sentence, _rng(), names, ["Elsewhere it rained."]) == "Elsewhere it rained."
    assert bench.plant("number", "No figures here at all.", _rng(), names, []) is None
    assert bench.plant("name", "nobody is named here.", _rng(), names, []) is None
    words = bench.plant("number", "They want twelve buttons.", _rng(), names, [])
    assert words and "twelve" not in words
    # seeded: the same seed plants the same error
    assert bench.plant("number", sentence, _rng(), names, []) == number


def test_sentences_cite_the_span_chunks_that_share_most_words() -> None:
    turns = [{"speaker": "A", "content": "the rubber case is cheap and soft for kids"}]
    said = "The rubber case is cheap and yellow."
    chunks = [
        ("c0", "A: hello there"),
        ("c1", "B: something else\nA: the rubber case is cheap and soft for kids"),
        ("c2", "A: the rubber case is cheap and soft for kids\nC: a yellow one"),
    ]
    assert bench.cite_chunks(said, turns, chunks) == ["c2", "c1"]
    assert bench.cite_chunks(said, turns, chunks, k=1) == ["c2"]
    assert bench.cite_chunks("Anything.", [{"speaker": "A", "content": "never said"}], chunks) == []


def test_scores_recall_per_kind_and_false_alarms() -> None:
    def case(kind: str, model: bool, grounding: bool) -> dict:
        return {"kind": kind, "model": model, "grounding": grounding, "combined": model or grounding}

    cases = [
        case("none", False, False),
        case("none", False, True),
        case("number", False, True),
        case("number", True, False),
        case("name", False, False),
        case("negation", True, True),
    ]
    figures = bench.scores(cases)
    assert figures["sentences"] == 2 and figures["planted"] == {
        "number": 2,
        "name": 1,
        "negation": 1,
        "other_meeting": 0,
    }
    assert figures["grounding"]["recall"] == 0.5 and figures["grounding"]["false_alarms"] == 0.5
    assert figures["model"]["recall_by_kind"] == {"number": 0.5, "name": 0.0, "negation": 1.0, "other_meeting": None}
    assert figures["combined"]["recall"] == 0.75 and figures["model"]["false_alarms"] == 0.0
    assert "| combined | 1.00 | 0.00 | 1.00 | n/a | 0.75 | 0.50 (2) |" in bench.markdown_table(figures)


def test_the_frontier_keeps_the_settings_nothing_beats_on_both_counts() -> None:
    def result(name: str, recall: float, alarms: float) -> dict:
        return {"settings": {"name": name}, "grounding": {"recall": recall, "false_alarms": alarms}}

    results = [result("a", 0.6, 0.0), result("b", 0.5, 0.1), result("c", 0.8, 0.2), result("d", 0.7, 0.0)]
    results.append(result("e", 0.9, 0.2))
    points = bench.frontier(results)
    assert [p["settings"]["name"] for p in points] == ["d", "e"]
    assert points[0] == {"settings": {"name": "d"}, "recall": 0.7, "false_alarms": 0.0}
    assert bench.frontier([]) == []


def _data(tmp_path: Path) -> Path:
    def meeting(m: int) -> dict:
        colour = ("red", "blue", "green")[m]
        transcript = [
            {"speaker": "Project Manager", "content": f"Welcome to meeting {m}. We should plan the remote."},
            {"speaker": "Marketing", "content": f"Our survey says {m + 20} users want a rubber case."},
            {
                "speaker": "Industrial Designer",
                "content": f"The {colour} rubber case was approved because it is cheap.",
            },
            {
                "speaker": "Project Manager",
                "content": f"Then the price is {m + 12} euros for each remote in store {m}.",
            },
        ]
        answer = (
            f"Marketing reported that {m + 20} users want a rubber case in the survey. "
            f"Industrial Designer said the {colour} rubber case was approved because it is cheap."
        )
        return {
            "id": f"m{m}",
            "transcript": transcript * 3,
            "topics": [],
            "queries": [
                {"kind": "general", "query": "Summarize.", "answer": "A meeting."},
                {"kind": "specific", "query": "What about the case?", "answer": answer, "span": [[1, 2]]},
            ],
        }

    data = tmp_path / "qmsum.jsonl"
    data.write_text("\n".join(json.dumps(meeting(m)) for m in range(3)))
    return data


def test_the_benchmark_runs_with_the_scripted_model_and_is_seeded(tmp_path: Path) -> None:
    data = _data(tmp_path)
    argv = ["--data", str(data), "--items", "0:3", "--fake"]
    assert bench.main([*argv, "--out", str(tmp_path / "a.json")]) == 0
    assert bench.main([*argv, "--out", str(tmp_path / "b.json")]) == 0
    first, second = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert [c["text"] for c in first["cases"]] == [c["text"] for c in second["cases"]]
    figures = first["figures"]
    assert figures["sentences"] == 6 and figures["planted"]["number"] == 3 and figures["planted"]["other_meeting"] == 6
    # the scripted model confirms everything: every flag comes from grounding
    assert figures["model"]["recall"] == 0.0 and figures["combined"] == figures["grounding"]
    assert figures["grounding"]["recall_by_kind"]["number"] == 1.0
    assert len(first["grounding_grid"]) == len(bench.GRID) and first["config"]["model"] == "scripted"
    changed = bench.main([*argv, "--out", str(tmp_path / "c.json"), "--seed", "7"])
    assert changed == 0
    third = json.loads((tmp_path / "c.json").read_text())
    assert [c["text"] for c in third["cases"]] != [c["text"] for c in first["cases"]]


def test_the_wide_grid_reports_the_frontier_of_the_grounding_check(tmp_path: Path) -> None:
    data = _data(tmp_path)
    out = tmp_path / "wide.json"
    assert bench.main(["--data", str(data), "--items", "0:3", "--fake", "--grid", "wide", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["config"]["grid"] == "wide" and len(bench.WIDE_GRID) == 140
    assert [r["settings"] for r in report["grounding_grid"]] == list(bench.WIDE_GRID)
    assert report["grounding_grid"][0]["grounding"] == report["figures"]["grounding"]
    points = report["grounding_frontier"]
    assert points and all(p["settings"] in bench.WIDE_GRID for p in points)
    assert [p["false_alarms"] for p in points] == sorted(p["false_alarms"] for p in points)
    assert all(a["recall"] < b["recall"] for a, b in itertools.pairwise(points))
    # the default is on the frontier or beaten by a point of it
    default = report["figures"]["grounding"]
    assert any(p["recall"] >= default["recall"] and p["false_alarms"] <= default["false_alarms"] for p in points)
    assert all("grid" not in c for c in report["cases"])


def test_a_checker_that_says_no_is_scored_as_the_model(tmp_path: Path) -> None:
    def no(messages: Sequence[BaseMessage]) -> str:
        count = str(messages[-1].content).split("Sentences:")[1].count("(cites ")
        return json.dumps({"verdicts": [{"n": i, "supported": False, "fix": ""} for i in range(1, count + 1)]})

    args = bench.argparse.Namespace(
        data=str(_data(tmp_path)),
        items="0:1",
        per_meeting=3,
        seed=0,
        batch=6,
        grid="fixed",
        namespace="t",
        embedder="hash",
        fake=False,
    )
    with use_chat_model(ScriptedChatModel(default=no)):
        report = bench.run(args)
    figures = report["figures"]
    assert figures["model"]["recall"] == 1.0 and figures["model"]["false_alarms"] == 1.0
    assert figures["combined"]["recall"] == 1.0 and figures["model_unchecked"] == 0
