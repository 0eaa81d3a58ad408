from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nodes.chain.manager import Answer, is_inferred, supporting_quotes, valid_citations
from nodes.chain.ordering.tree import ChowLiuTree
from nodes.chain.passages import (
    bridging,
    build_passage_index,
    check_quotes,
    hop_first,
    next_hop,
    quoted_sentences,
    sentence_index,
    span_labels,
    split_passages,
)
from nodes.chain.reading import ReadingPolicy, chunk_bonus, next_batch
from nodes.chain.worker import closest, on_topic, with_context, worker_step

CHUNKS = [
    ("c0", "Alpha is one. Beta is two.\n\nGamma is three."),
    ("c1", "Gamma is three. Delta is four.\n\nEpsilon is five."),  # opens with the overlap of c0
]


def test_passages_number_sentences_per_chunk_and_leave_out_the_overlap() -> None:
    passages = split_passages(CHUNKS, passage_tokens=120)
    assert [(p.chunk_id, p.labels) for p in passages] == [
        ("c0", ["c0.1", "c0.2"]),
        ("c0", ["c0.3"]),
        ("c1", ["c1.2"]),  # c1.1 repeats c0.3: left out, but the numbering keeps it
        ("c1", ["c1.3"]),
    ]
    assert passages[0].labelled() == "[c0.1] Alpha is one. [c0.2] Beta is two."
    assert passages[2].span == "c1.2-2" and span_labels("c0.1-3") == ["c0.1", "c0.2", "c0.3"]


def test_a_chunk_that_only_repeats_the_previous_one_is_kept() -> None:
    passages = split_passages([("c0", "Same words here."), ("c1", "Same words here.")])
    assert [p.chunk_id for p in passages] == ["c0", "c1"]


def test_passages_stay_within_their_size_and_long_sentences_are_cut() -> None:
    text = " ".join(f"word{i}" for i in range(200)) + "."
    passages = split_passages([("c0", f"Short one. Short two. {text}")], passage_tokens=30)
    assert all(p.tokens <= 40 for p in passages)
    assert " ".join(p.text for p in passages).split() == f"Short one. Short two. {text}".split()
    labels = [label for p in passages for label in p.labels]
    assert labels == [f"c0.{i}" for i in range(1, len(labels) + 1)]


def test_quotes_are_checked_against_the_sentences_shown() -> None:
    shown = sentence_index(split_passages(CHUNKS)[:2])
    checked = check_quotes(["c0.2", "[c0.1]", "c9.9", "c0.2", "Gamma is three", "Zeta is six, said nobody."], shown)
    assert checked.kept == ["c0.2", "c0.1", "c0.3"]
    assert checked.dropped == 2  # a label never shown and a text that is in no sentence
    copied = check_quotes(["[c0.3] Gamma is three. [c0.1] Alpha is one.", "[c4.4] Made up."], shown)
    assert copied.kept == ["c0.3", "c0.1"] and copied.dropped == 1  # sentences copied behind their labels


def test_next_batch_takes_the_best_passages_that_fit_best_first() -> None:
    scores = np.array([0.1, 2.0, -1.0, 1.5, 0.9])
    tokens = [10, 30, 10, 30, 10]
    assert next_batch(scores, tokens, [], 50, floor=-0.5) == [1, 4, 0]
    assert next_batch(scores, tokens, [1], 50, floor=-0.5) == [3, 4, 0]
    assert next_batch(scores, tokens, [], 20, floor=-0.5) == [4, 0]
    assert next_batch(scores, tokens, [], 5, floor=-0.5) == []
    assert next_batch(scores, tokens, [], 5, floor=-0.5, at_least_one=True) == [1]
    assert next_batch(scores, tokens, [], 100, floor=None) == [1, 3, 4, 0, 2]


def test_chunk_bonus_favours_tree_neighbours_of_what_was_read() -> None:
    tree = ChowLiuTree(n=4, edges=[(0, 1, 0.9), (1, 2, 0.5), (2, 3, 0.1)])
    policy = ReadingPolicy(tree_weight=1.0, jump_penalty=2.0)
    assert chunk_bonus(tree, [], policy).tolist() == [0, 0, 0, 0]
    bonus = chunk_bonus(tree, [1], policy)
    assert bonus[1] == 0 and bonus[3] == -2.0
    assert bonus[0] > bonus[2] > -2.0  # the stronger edge gives the larger bonus


def test_citations_quotes_and_inference_come_from_the_labels() -> None:
    notes = ["[c0.1] Alpha is one.\n[c1.2] Delta is four."]
    answer = Answer(answer="four", evidence=["c1.2", "c7.1"], explanation="Delta [c1.2].")
    assert valid_citations(answer, ["c0", "c1"], notes) == ["c1"]
    assert supporting_quotes(answer, notes) == ["[c1.2] Delta is four."]
    assert not is_inferred("four", supporting_quotes(answer, notes))
    assert is_inferred("Alpha and Delta are siblings", supporting_quotes(answer, notes))
    unknown = Answer(answer="unknown")
    assert valid_citations(unknown, ["c0", "c1"], notes) == [] and supporting_quotes(unknown, notes) == []
    assert not is_inferred("unknown", [])
    bare = Answer(answer="one")  # cites nothing: credited to every quoted chunk
    assert valid_citations(bare, ["c0", "c1"], notes) == ["c0", "c1"]


def test_passage_index_scores_by_bm25() -> None:
    index = build_passage_index(CHUNKS)
    scores = index.lexical("delta four")
    assert int(np.argmax(scores)) == 2 and index.chunks.tolist() == [0, 0, 1, 1]
    assert index.of_chunk(1) == [2, 3] and index.lexical("").tolist() == [0, 0, 0, 0]


def test_a_quote_keeps_the_opening_sentence_of_its_passage() -> None:
    passages = split_passages(CHUNKS)
    assert with_context(["c0.2", "c1.3", "c0.1"], passages) == ["c0.1", "c0.2", "c1.3"]
    assert with_context(["c9.9"], passages) == ["c9.9"]


def test_quotes_off_the_question_and_the_missing_piece_are_left_out() -> None:
    shown = {"c0.1": "Alice leads the team.", "c0.2": "The airline was founded in 1946.", "c1.1": "Alice married Bob."}
    assert on_topic(["c0.1", "c0.2", "c1.1"], shown, ["Who leads the team?", ""], 6) == ["c0.1"]
    assert on_topic(["c0.1", "c0.2", "c1.1"], shown, ["Who leads the team?", "whom Alice married"], 6) == [
        "c0.1",
        "c1.1",
    ]
    assert on_topic(["c0.1", "c1.1"], shown, ["Alice team"], 1) == ["c0.1"]  # the most overlapping first


def test_hard_wrapped_lines_are_joined_but_lists_and_turns_are_not() -> None:
    text = "Bob Chen manages\nprocurement and the contracts. Ann\nleads.\n\n"
    text += "- one item\n- two items\nAnn: hello there.\nBob: hi."
    passages = split_passages([("c0", text)])
    assert passages[0].sentences == ("Bob Chen manages procurement and the contracts.", "Ann leads.")
    assert [s for p in passages[1:] for s in p.sentences] == [
        "- one item",
        "- two items",
        "Ann: hello there.",
        "Bob: hi.",
    ]


def test_the_sentences_closest_to_the_question_are_quoted_by_their_words() -> None:
    shown = {
        "c0.1": "Bob Chen manages procurement and the supplier contracts.",
        "c0.2": "Alice leads the team.",
        "c1.1": "Bob Chen did find a supplier of coatings.",
        "c1.2": "Procurement is hard.",
    }
    question = "Who manages procurement, and what supplier did they find?"
    assert closest(shown, [question, ""]) == ["c0.1", "c1.1"]  # 3 and 2 shared words; c1.2 only one
    assert closest(shown, [question], most=1) == ["c0.1"]
    assert closest(shown, ["Where is Oslo?"]) == []


def test_initials_and_titles_do_not_end_a_sentence() -> None:
    passages = split_passages([("c0", "It began with G. Stanley Hall in 1904. Dr. Chen agreed. The end.")])
    assert passages[0].sentences == ("It began with G. Stanley Hall in 1904.", "Dr. Chen agreed.", "The end.")


JOURNAL_QUESTION = (
    "Who was the first president of the association which published Journal of Psychotherapy Integration?"
)
JOURNAL = (
    "Journal of Psychotherapy Integration is a peer-reviewed journal published by the American Psychological "
    "Association on behalf of the Society for the Exploration of Psychotherapy Integration."
)
BRIDGE = "Hall, who was the first president of the American Psychological Association, viewed adolescence as turmoil."


def test_the_next_hop_is_what_the_best_quote_names_beyond_the_question() -> None:
    evidence = {"1:c19.18": JOURNAL, "1:c19.16": "The journal's first volumes were published under an old title."}
    hop = next_hop(JOURNAL_QUESTION, evidence)
    assert hop is not None
    assert {"first", "president"} <= hop.lacking and "journal" not in hop.lacking  # the anchor is c19.18 alone
    assert {"american", "psychological"} <= hop.named and "volumes" not in hop.named
    assert hop.query.startswith("peer reviewed american psychological")
    assert (
        next_hop(JOURNAL_QUESTION, {"c1.1": "The journal closed in 2016."}) is None
    )  # one shared word anchors nothing
    assert next_hop(JOURNAL_QUESTION, {}) is None
    assert quoted_sentences(f"[1:c19.18] {JOURNAL}\nnot a quote\n[c2.1] Two.") == {"1:c19.18": JOURNAL, "c2.1": "Two."}


def test_a_bridge_joins_the_anchor_to_what_the_question_still_lacks() -> None:
    shown = {
        "1:c11.3": "Adolescence: the formal study of adolescent psychology began in 1904.",
        "1:c11.4": BRIDGE,
        "1:c14.21": "Families, Systems and Health is a journal published by the American Psychological Association.",
        "2:c3.1": "The first president of the chess club was Ann Lee.",
        "1:c19.18": JOURNAL,
    }
    evidence = {"1:c19.18": JOURNAL}
    assert bridging(shown, evidence, JOURNAL_QUESTION) == ["1:c11.4"]  # c14.21 lacks nothing new, c3.1 links nothing
    assert bridging(shown, {}, JOURNAL_QUESTION) == []
    assert bridging({"1:c19.18": JOURNAL}, evidence, JOURNAL_QUESTION) == []  # what is quoted is no bridge
    more = {**shown, "3:c1.1": "The American Psychological Association's first president, Hall, also led its Society."}
    assert bridging(more, evidence, JOURNAL_QUESTION, most=1) == ["3:c1.1"]  # the most shared words first


def test_a_worker_quotes_the_bridge_its_model_passed_over_when_bridges_are_on() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from stores.models import LLM, use_chat_model

    issue = "The first issue of the Journal of Psychotherapy Integration was published in 1991."
    passages = split_passages([("1:c19", f"{JOURNAL} {issue}"), ("1:c11", BRIDGE)])
    reply = '{"quotes": ["1:c19.1"], "missing": "the first president of that association"}'
    # the sentences sharing the most words with the question (c19.1, c19.2) are quoted by their words either way
    for bridges, expected in ((True, {"1:c19.1", "1:c19.2", "1:c11.1"}), (False, {"1:c19.1", "1:c19.2"})):
        with use_chat_model(FakeListChatModel(responses=[reply])):
            result = worker_step(
                LLM("worker", cache=False),
                question=JOURNAL_QUESTION,
                notes="",
                passages=passages,
                lang="en",
                bridges=bridges,
            )
        assert set(quoted_sentences(result.notes)) == expected


def test_the_manager_is_shown_the_hop_first() -> None:
    noise = "[1:c18.18] Culture and Masculinities was a journal first published in 2009 by Men's Studies Press."
    evidence = f"[1:c11.4] {BRIDGE}\n{noise}\n[1:c19.18] {JOURNAL}"
    assert hop_first(JOURNAL_QUESTION, evidence).splitlines() == [f"[1:c19.18] {JOURNAL}", f"[1:c11.4] {BRIDGE}", noise]
    assert hop_first("Where is Oslo?", evidence) == evidence  # no anchor: as it was


@pytest.mark.parametrize(
    ("tag", "title", "pattern"), [(None, "WorkerQuotes", "^c[0-9]+"), (2, "TaggedQuotes", "^[0-9]+:c")]
)
def test_a_worker_asks_for_labels_of_the_form_it_was_shown(tag: int | None, title: str, pattern: str) -> None:
    """One document's labels (``c3.1``) or a collection's (``2:c3.1``): the reply schema follows the passages."""
    from doubles.chat import ScriptedChatModel, recording
    from stores.labels import chunk_label
    from stores.models import LLM, use_chat_model

    chunk = chunk_label(19, tag)
    sent: list[dict[str, object]] = []
    reply = f'{{"quotes": ["{chunk}.1"], "missing": ""}}'
    with use_chat_model(ScriptedChatModel(default=reply)), recording(sent):
        result = worker_step(
            LLM("worker", cache=False),
            question=JOURNAL_QUESTION,
            notes="",
            passages=split_passages([(chunk, JOURNAL)]),
            lang="en",
        )
    schema: Any = sent[0]["schema"]
    assert schema["title"] == title and schema["properties"]["quotes"]["items"]["pattern"].startswith(pattern)
    assert f"e.g. {chunk_label(3, tag)}.2" in schema["properties"]["quotes"]["description"]
    assert list(quoted_sentences(result.notes)) == [f"{chunk}.1"]
