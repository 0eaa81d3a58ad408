"""Benchmark command-line values: comma-separated names checked against what a benchmark offers."""

from __future__ import annotations

import pytest

from bench.options import chosen


def test_names_are_split_stripped_and_kept_in_order() -> None:
    assert chosen(" topk, anytime,,", ("anytime", "topk", "full"), "methods") == ["topk", "anytime"]
    assert chosen("", ("anytime",), "methods") == []


def test_an_unknown_name_stops_the_run_and_says_what_is_offered() -> None:
    with pytest.raises(SystemExit, match=r"unknown suites \['soak'\]; choose from index, retention"):
        chosen("index,soak", {"index": 1, "retention": 2}, "suites")
