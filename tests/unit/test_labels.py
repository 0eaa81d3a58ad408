"""The label grammar: one module reads and writes chunk and sentence labels, and sorts them one way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stores.errors import InputError
from stores.labels import (
    CITED,
    QUOTE_LINE,
    SENTENCE_ONLY,
    chunk_label,
    citations_in,
    label_position,
    label_tag,
    normalise_chunk_id,
    sentences_cited,
    split_label,
)

ROOT = Path(__file__).resolve().parents[2]


def test_labels_are_written_and_read_back_tagged_or_not() -> None:
    assert chunk_label(12) == "c12" and chunk_label(12, 2) == "2:c12"
    assert split_label(chunk_label(3, 4) + ".5") == (4, "c3.5") and split_label("c0") == (None, "c0")
    assert label_tag("2:c3.1") == 2 and label_tag("c3") is None and label_tag("chunk") is None
    with pytest.raises(InputError):
        split_label("c3:2")


def test_one_sort_key_orders_documents_chunks_and_sentences() -> None:
    labels = ["2:c1.1", "c10.2", "1:c2", "c2.10", "c2.9", "1:c10.1", "c2"]
    assert sorted(labels, key=label_position) == ["c2", "c2.9", "c2.10", "c10.2", "1:c2", "1:c10.1", "2:c1.1"]
    assert label_position("no label") == (0, 0, 0)


def test_patterns_find_labels_in_replies_and_evidence() -> None:
    text = "Yes [c1], and [2:c12]; [c3.2] not [3] or [o2] or [c 4]."
    assert CITED.findall(text) == ["c1", "2:c12", "c3.2"]
    assert sentences_cited(text) == ["c3.2"]
    assert [SENTENCE_ONLY.match(r) is not None for r in (" [2:c3.4] ", "c3.4", "c3", "c3.4 and more")] == [
        True,
        True,
        False,
        False,
    ]
    found = QUOTE_LINE.match("[2:c3.4] The pump runs.")
    assert found is not None and found.group(1) == "2:c3.4" and QUOTE_LINE.match("[2:c3] The pump.") is None


def test_chunk_ids_as_models_write_them_are_made_canonical() -> None:
    written = ("c3", "[c3]", "C012", "7", " [2: c3] ", "chunk", "c3.2", "")
    assert [normalise_chunk_id(x) for x in written] == ["c3", "c3", "c12", "c7", "2:c3", "", "", ""]
    assert citations_in("As [c3, c5] and [3]; also [2:c1] and [C5].") == ["c3", "c5", "2:c1"]


def test_no_other_module_writes_the_grammar() -> None:
    """Label regexes and label formats live in stores.labels only (test doubles excepted)."""
    pattern = re.compile(r"""c\\d|c\[0-9\]|f"c\{|\[0-9\]\+:c""")
    packages = ("graphs", "nodes", "stores", "surfaces", "deploy")
    offenders = [
        str(path.relative_to(ROOT))
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "labels.py" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
