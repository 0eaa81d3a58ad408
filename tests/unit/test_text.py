"""The shared text helpers: content words and their overlap, citation tags, names, rank fusion."""

from __future__ import annotations

import pytest

from stores.errors import InputError
from stores.ranking import rrf_scores
from stores.text import (
    STOPWORDS,
    check_name,
    content_words,
    is_name,
    jaccard,
    lexical_tokens,
    overlap,
)


def test_lexical_tokens_split_words_and_cjk_bigrams() -> None:
    assert lexical_tokens("The Budget, 40 euros") == ["the", "budget", "40", "euros"]
    assert lexical_tokens("预算表") == ["预", "算", "预算", "表", "算表"]


def test_content_words_drop_stopwords_short_words_and_optionally_cjk_characters() -> None:
    assert content_words("What is the budget of Alice?") == {"budget", "alice"}
    assert content_words("an ox at 40", min_chars=3) == set()
    assert content_words("预算表") == {"预", "算", "表", "预算", "算表"}
    assert content_words("预算表", cjk_chars=False) == {"预算", "算表"}
    assert content_words("Tell me", stopwords=STOPWORDS | {"tell"}) == set()


def test_overlap_is_the_share_of_words_found() -> None:
    assert overlap({"a", "b", "c", "d"}, {"a", "b", "x"}) == 0.5
    assert overlap(set(), {"a"}) == 0.0 and overlap(set(), {"a"}, empty=1.0) == 1.0
    assert jaccard({"a", "b", "c"}, {"b", "c", "d"}) == 0.5 and jaccard(set(), set()) == 0.0


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        ("bad name", {}, r"invalid thing 'bad name': use 1-63 letters, digits, '_' or '-', starting with a letter"),
        ("-x", {}, "invalid thing"),
        ("x" * 64, {}, "invalid thing"),
        ("ok\n", {}, "invalid thing"),
        (3, {}, "invalid thing 3"),
        ("a/b", {"max_chars": 128, "marks": "_.:-"}, r"1-128 letters, digits, '_', '\.', ':' or '-'"),
    ],
)
def test_check_name_refuses_with_what_is_allowed(value: object, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_name(value, "thing", **kwargs)


def test_check_name_accepts_names() -> None:
    assert check_name("team-1_a", "thing") == "team-1_a" and check_name("x" * 63, "thing")
    assert check_name("s.1:2", "session id", max_chars=128, marks="_.:-") == "s.1:2"
    assert is_name("abc") and not is_name("a.b") and is_name("a.b", marks="._-")


def test_rrf_scores_add_weighted_reciprocal_ranks_in_first_seen_order() -> None:
    scores = rrf_scores([["a", "b"], ["b", "c"]], [1.0, 2.0], k=10)
    assert list(scores) == ["a", "b", "c"]
    assert scores == pytest.approx({"a": 1 / 11, "b": 1 / 12 + 2 / 11, "c": 2 / 12})
    with pytest.raises(InputError, match="one weight per ranking"):
        rrf_scores([["a"]], [1.0, 2.0])
