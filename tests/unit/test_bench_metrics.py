"""QA metrics (exact match, token F1) and the QA jsonl loader."""

from __future__ import annotations

import json

import pytest

from bench.metrics import answer_tokens, exact_match, mean_scores, normalize_answer, token_f1
from bench.qa_data import load_qa, load_qa_dir, parse_item


def test_normalisation_follows_squad():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an Apple, a pear") == "apple pear"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("  ") == ""


def test_exact_match_any_answer():
    assert exact_match("the Eiffel tower.", ["Eiffel Tower", "Tour Eiffel"]) == 1.0
    assert exact_match("Tour Eiffel", ["Eiffel Tower", "Tour Eiffel"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("Paris", "paris") == 1.0
    assert exact_match("Paris", []) == 0.0


def test_token_f1_is_the_best_over_answers():
    assert token_f1("Eiffel Tower", ["Eiffel Tower"]) == 1.0
    # pred "eiffel" vs gold "eiffel tower": precision 1, recall 1/2 -> F1 2/3
    assert token_f1("Eiffel", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    assert token_f1("Eiffel", ["Louvre", "Eiffel Tower"]) == pytest.approx(2 / 3)
    assert token_f1("red red blue", ["red blue green"]) == pytest.approx(2 / 3)
    assert token_f1("nothing", ["Eiffel Tower"]) == 0.0
    assert token_f1("the", ["a"]) == 1.0  # both normalise to no tokens
    assert token_f1("Paris", []) == 0.0


def test_chinese_uses_character_tokens():
    assert answer_tokens("2018年世界杯") == ["2018", "年", "世", "界", "杯"]
    assert normalize_answer("北京，中国。") == "北 京 中 国"
    assert exact_match("北京", ["北京。"]) == 1.0
    assert exact_match("北 京", ["北京"]) == 1.0
    # pred 北京市 (3 chars) vs gold 北京 (2 chars): precision 2/3, recall 1 -> F1 0.8
    assert token_f1("北京市", ["北京"]) == pytest.approx(0.8)
    assert token_f1("上海", ["北京"]) == 0.0
    assert answer_tokens("ＡＢＣ（公司）") == ["abc", "公", "司"]


def test_mean_scores():
    scores = mean_scores(["Paris", "Lyon"], [["paris"], ["Marseille"]])
    assert scores == {"em": 50.0, "f1": 50.0, "n": 2}
    assert mean_scores([], []) == {"em": 0.0, "f1": 0.0, "n": 0}
    with pytest.raises(ValueError):
        mean_scores(["a"], [])


def _item(**overrides):
    item = {
        "id": "q1",
        "source": "hotpotqa",
        "question": "Who?",
        "answers": ["Ann"],
        "type": "bridge",
        "paragraphs": [
            {"title": "A", "text": "alpha", "supporting": False},
            {"title": "B", "text": "beta", "supporting": True},
        ],
    }
    item.update(overrides)
    return item


def test_loader_reads_the_schema(tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text(json.dumps(_item()) + "\n\n" + json.dumps(_item(id="q2")) + "\n", encoding="utf-8")
    items = load_qa(path)
    assert [i.id for i in items] == ["q1", "q2"]
    first = items[0]
    assert first.chunks == ["A: alpha", "B: beta"]
    assert first.supporting == [1]
    assert first.answers == ["Ann"] and first.extra == {"type": "bridge"}
    assert load_qa_dir(tmp_path) == {"toy": items}


def test_loader_rejects_bad_items(tmp_path):
    with pytest.raises(ValueError, match="missing keys"):
        parse_item({"id": "x"})
    with pytest.raises(ValueError, match="paragraph 0"):
        parse_item(_item(paragraphs=[{"title": "no text"}]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        load_qa(bad)
    with pytest.raises(FileNotFoundError):
        load_qa_dir(tmp_path / "missing")
