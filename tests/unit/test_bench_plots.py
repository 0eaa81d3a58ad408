"""bench.plots draws every plot from small synthetic result files and refuses malformed ones by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.plots import PLOTS, PlotInputError, draw_all, main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _chain_row(items: int, f1: float, tokens: float, recall: float, words: int) -> dict[str, Any]:
    return {"items": items, "f1": f1, "tokens": tokens, "evidence_recall": recall, "words": words, "median_s": None}


def _route_row(r1: float, r5: float, r10: float) -> dict[str, float]:
    return {"agent_recall@1": r1, "agent_recall@5": r5, "agent_recall@10": r10}


def _offload_policy(per_call: float, per_turn: float, by_turn: list[float]) -> dict[str, Any]:
    return {
        "turns": len(by_turn),
        "input_tokens_per_call": per_call,
        "input_tokens_per_turn": per_turn,
        "input_tokens_by_turn": {str(i): v for i, v in enumerate(by_turn, 1)},
    }


def write_results(folder: Path) -> None:
    """The smallest result files each plot reads, in the shape the benchmarks write them."""
    anytime = _chain_row(4, 0.2, 3_500, 0.6, 10_000)
    full = _chain_row(2, 0.4, 25_000, 1.0, 10_000)
    files: dict[str, Any] = {
        "chain_long.json": {
            "long": {"anytime": anytime, "topk": _chain_row(4, 0.25, 2_600, 0.6, 10_000), "chow-liu-bfs": full},
            "long_curve": {
                "2500": {"anytime": _chain_row(4, 0.5, 3_400, 0.9, 2_500), "chow-liu-bfs": full | {"words": 2_500}},
                "orig": {"anytime": anytime, "chow-liu-bfs": full},
                "40000": {"anytime": _chain_row(4, 0.5, 3_300, 0.4, 40_000)},
            },
        },
        "factcheck_grounding_frontier_0_4.json": {
            "figures": {
                "sentences": 10,
                "planted": {"name": 5, "negation": 7},
                "grounding": {"recall": 0.7, "false_alarms": 0.1},
            },
            "grounding_grid": [
                {"grounding": {"recall": r, "false_alarms": f}} for r, f in ((0.4, 0.0), (0.7, 0.1), (0.6, 0.2))
            ],
            "grounding_frontier": [{"recall": 0.4, "false_alarms": 0.0}, {"recall": 0.7, "false_alarms": 0.1}],
            "config": {"items": "0:4"},
        },
        "route.json": {
            "config": {"agents": 3, "tools": 5, "queries_evaluated": 4},
            "default": _route_row(0.5, 0.75, 1.0),
            "bm25": _route_row(0.25, 0.5, 0.75),
            "seed_claim": {"agent_recall@5": 0.8},
            "expanded": {"default": _route_row(0.5, 1.0, 1.0)},
        },
        "offload.json": {
            "config": {"meetings": ["m1"], "model": "scripted"},
            "full": _offload_policy(800, 800, [400, 800, 1_200]),
            "offload": _offload_policy(450, 600, [400, 450, 500]),
        },
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data), encoding="utf-8")


def test_every_plot_is_written_as_png(tmp_path: Path) -> None:
    results, out = tmp_path / "results", tmp_path / "out" / "img"
    results.mkdir()
    write_results(results)
    assert main(["--results", str(results), "--out", str(out)]) == 0
    written = sorted(path.name for path in out.iterdir())
    assert written == sorted(f"{name}.png" for name in PLOTS)
    for name in written:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5_000  # a drawn figure, not an empty file
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and p.parent != out) == sorted(
        p.name for p in results.iterdir()
    ), "nothing is written outside --out"


def test_the_same_results_give_the_same_bytes(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    write_results(results)
    first = [p.read_bytes() for p in draw_all(results, tmp_path / "a")]
    second = [p.read_bytes() for p in draw_all(results, tmp_path / "b")]
    assert first == second


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("chain_long.json", lambda d: d["long"]["anytime"].pop("tokens"), "long.anytime.tokens"),
        ("chain_long.json", lambda d: d["long"]["topk"].update(f1="high"), "long.topk.f1"),
        ("route.json", lambda d: d.pop("default"), "default"),
        ("offload.json", lambda d: d["offload"].update(input_tokens_by_turn={}), "offload.input_tokens_by_turn"),
        ("factcheck_grounding_frontier_0_4.json", lambda d: d.update(grounding_grid=[]), "grounding_grid"),
    ],
)
def test_a_malformed_field_is_named_with_its_file(tmp_path: Path, name: str, damage: Any, message: str) -> None:
    write_results(tmp_path)
    data = json.loads((tmp_path / name).read_text())
    damage(data)
    (tmp_path / name).write_text(json.dumps(data))
    with pytest.raises(PlotInputError) as caught:
        draw_all(tmp_path, tmp_path / "out")
    assert name in str(caught.value) and message in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_not_a_number_is_refused(tmp_path: Path) -> None:
    write_results(tmp_path)
    text = (tmp_path / "chain_long.json").read_text().replace('"f1": 0.25', '"f1": NaN')
    (tmp_path / "chain_long.json").write_text(text)
    with pytest.raises(PlotInputError, match=r"long\.topk\.f1"):
        draw_all(tmp_path, tmp_path / "out")


def test_missing_and_broken_files_end_the_command_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "chain_long.json: no such result file" in capsys.readouterr().err
    write_results(tmp_path)
    (tmp_path / "route.json").write_text("{not json")
    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "route.json: not a readable JSON file" in capsys.readouterr().err


def test_each_evidence_reading_present_is_drawn_and_checked(tmp_path: Path) -> None:
    write_results(tmp_path)
    plain = draw_all(tmp_path, tmp_path / "plain")[1].read_bytes()
    (tmp_path / "chain_long_batches.json").write_text(
        json.dumps({"long": {"anytime": _chain_row(4, 0.3, 5_000, 0.9, 10_000)}})
    )
    drawn = draw_all(tmp_path, tmp_path / "drawn")[1].read_bytes()
    assert drawn != plain  # the reading's point (and legend) is on the accuracy plot
    (tmp_path / "chain_long_passages.json").write_text(json.dumps({"long": {"anytime": {"items": 4}}}))
    with pytest.raises(PlotInputError, match=r"chain_long_passages\.json.*long\.anytime"):
        draw_all(tmp_path, tmp_path / "out")
