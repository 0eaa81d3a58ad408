"""bench.ingest_pdf: the scores of the PDF libraries' text and falcon.md printed in columns."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.ingest_pdf import READERS, in_order, majority, measure, printed_falcon, quality, words


def test_the_majority_counts_a_word_as_two_of_three_libraries_read_it() -> None:
    counts = [Counter({"pump": 2, "farm": 1}), Counter({"pump": 1, "farm": 1}), Counter({"pump": 3})]
    assert majority(counts) == Counter({"pump": 2, "farm": 1})


def test_quality_finds_glued_and_split_words() -> None:
    reference = words("the solar pump moves water")
    scored = quality("the solarpumpmoveswaterfromwells pump\nmo-\nves water", reference)
    assert scored["agree"] == 0.5 and scored["found"] == 0.6 and scored["broken"] == 1 and scored["glued"] > 0


def test_reading_order_is_one_for_the_text_and_lower_when_lines_interleave() -> None:
    truth = "first column line one first column line two second column line one"
    assert in_order(truth, truth) == 1.0
    assert in_order("first column line one second column line one first column line two", truth) < 1.0


def test_falcon_printed_in_two_columns_reads_in_order_with_pypdf(tmp_path: Path) -> None:
    path, truth = printed_falcon(2, tmp_path)
    assert truth.startswith("Project Falcon") and "#" not in truth
    row = measure(path, rounds=1, truth=truth)
    assert set(READERS) <= set(row) and row["pages"] == 1
    assert row["pypdf"]["order"] > 0.95 and row["pypdf"]["found"] > 0.95
    assert row["layout"]["lines_left_out"] == 0
