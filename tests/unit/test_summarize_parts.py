"""The pieces of the summarize workflow: citations, questions, routing, merging, length, baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from doubles.chat import ScriptedChatModel
from nodes.collection.sources import Sources
from nodes.ingest import ingest
from nodes.summarize.baselines import cite_chunk, group_notes, is_none
from nodes.summarize.context import DEFAULT_EXPERTS
from nodes.summarize.editing import (
    choose_expert,
    draft_changed,
    fallback_merge,
    new_questions,
    questions_schema,
    usable_answers,
)
from nodes.summarize.expert import AnswerCache, answer_question, citations_in, normalise_chunk_id, says_not_found
from nodes.summarize.fact_checker import factcheck_stats
from nodes.summarize.length import draft_fits, length_units, trim_to_length
from nodes.summarize.sentences import parse_cited_sentences, render_summary, text_blocks, with_citations
from stores.models import LLM, ModelOutputError, use_chat_model
from stores.usage import track_usage
from stores.vectorstore import get_store

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_citations_are_read_in_every_common_form() -> None:
    assert citations_in("A [c3]. B [c5, c7] and [C2][4]; again [c3]") == ["c3", "c5", "c7", "c2", "c4"]
    assert citations_in("预算为四万欧元[c1]。团队[c2、c3]") == ["c1", "c2", "c3"]
    assert citations_in("no citations [here] or [c]") == []
    assert [normalise_chunk_id(x) for x in ("c3", "[c3]", "C12", "7", "chunk")] == ["c3", "c3", "c12", "c7", ""]


def test_parse_cited_sentences_attaches_trailing_citations_and_drops_unknown_ids() -> None:
    text = "The budget is 40,000 euros. [c1] Trials start in June [c3]. Aliens came [c99].\n\n# Heading\n"
    out = parse_cited_sentences(text, ["c0", "c1", "c2", "c3"])
    assert out == [
        {"text": "The budget is 40,000 euros.", "citations": ["c1"]},
        {"text": "Trials start in June.", "citations": ["c3"]},
        {"text": "Aliens came.", "citations": []},
    ]
    zh = parse_cited_sentences("预算为四万欧元。[c1]试验六月开始[c3]。", ["c1", "c3"])
    assert zh == [{"text": "预算为四万欧元。", "citations": ["c1"]}, {"text": "试验六月开始。", "citations": ["c3"]}]


def test_bullets_and_wrapped_lines() -> None:
    text = "- First point [c0]\n  continues here.\n* Second point [c1].\n1. Third [c2].\n\nA wrapped\nparagraph [c3]."
    assert text_blocks(text) == [
        "First point [c0] continues here.",
        "Second point [c1].",
        "Third [c2].",
        "A wrapped paragraph [c3].",
    ]
    sentences = parse_cited_sentences(text)
    assert [s["citations"] for s in sentences] == [["c0"], ["c1"], ["c2"], ["c3"]]
    assert render_summary(sentences[:2], "bullets") == "- First point continues here.\n- Second point."
    assert with_citations(sentences[:2], "paragraphs") == "First point continues here. [c0] Second point. [c1]"
    assert render_summary([{"text": "一。"}, {"text": "二。"}], "paragraphs", "zh") == "一。二。"


def test_not_found_answers_are_recognised() -> None:
    assert says_not_found("not found") and says_not_found("Not found in the excerpts.") and says_not_found("未找到")
    assert says_not_found("")
    assert not says_not_found("The budget is 40,000 euros [c1].")


def test_question_schema_limits_count_types_and_experts() -> None:
    schema = questions_schema(["fact", "people"], 2)
    ok = {"questions": [{"question": "Who leads the team?", "type": "fact", "target_expert": "people"}]}
    assert schema.model_validate(ok)
    for bad in (
        {"questions": []},
        {"questions": [ok["questions"][0]] * 3},
        {"questions": [{**ok["questions"][0], "type": "gossip"}]},
        {"questions": [{**ok["questions"][0], "target_expert": "style"}]},
        {"questions": [{**ok["questions"][0], "question": "Why?"}]},
    ):
        with pytest.raises(ValidationError):
            schema.model_validate(bad)
    assert schema.model_json_schema()["$defs"]["EditorQuestion"]["properties"]["target_expert"]["enum"] == [
        "fact",
        "people",
    ]


def test_new_questions_drop_repeats() -> None:
    asked = ["What budget did the committee approve?"]
    candidates = [
        {"question": "What budget did the committee approve?"},
        {"question": "Who leads the engineering team?"},
        {"question": "Who leads the engineering team ?"},
        {"question": "?!"},
    ]
    assert new_questions(candidates, asked) == [{"question": "Who leads the engineering team?"}]


def test_fixed_routing_falls_back_by_type_then_first_expert() -> None:
    experts = {"fact": "facts", "people": "who"}
    assert (
        choose_expert({"question": "q", "type": "opinion", "target_expert": "people"}, experts, "fixed", "d")
        == "people"
    )
    assert choose_expert({"question": "q", "type": "fact", "target_expert": "nobody"}, experts, "fixed", "d") == "fact"
    assert choose_expert({"question": "q", "type": "style", "target_expert": "nobody"}, experts, "fixed", "d") == "fact"
    # "router" without a router module falls back to the fixed choice
    assert (
        choose_expert({"question": "q", "type": "fact", "target_expert": "people"}, experts, "router", "d") in experts
    )


def test_usable_answers_dedupe_by_confidence_and_order_by_document() -> None:
    answers = [
        {
            "id": "a",
            "status": "answered",
            "answer": "Trials start in June [c3].",
            "citations": ["c3"],
            "confidence": 0.5,
        },
        {
            "id": "b",
            "status": "answered",
            "answer": "Trials start in June. [c3]",
            "citations": ["c3"],
            "confidence": 0.9,
        },
        {
            "id": "c",
            "status": "answered",
            "answer": "Budget 40,000 euros [c1].",
            "citations": ["c1"],
            "confidence": 0.4,
        },
        {"id": "d", "status": "not_found", "answer": "not found", "citations": [], "confidence": 0.0},
        {"id": "e", "status": "failed", "answer": "", "citations": [], "confidence": 0.0},
    ]
    kept = usable_answers(answers)
    assert [a["id"] for a in kept] == ["c", "b"]


def test_draft_change_and_length_helpers() -> None:
    assert draft_changed("", "New text.") and not draft_changed("", "  ")
    assert not draft_changed("The budget is 40,000 euros [c1].", "The budget is 40,000 euros [c1]. ")
    assert draft_changed(
        "The budget is 40,000 euros [c1].", "The budget is 40,000 euros [c1]. Trials start in June [c3]."
    )
    assert length_units("one two three", "en") == 3 and length_units("预算为四万欧元 2024", "zh") == 8
    sentences = [{"text": "one two three four"}, {"text": "five six seven"}, {"text": "eight nine ten"}]
    assert trim_to_length(sentences, 5, "en") == sentences[:1]
    assert trim_to_length(sentences, 6, "en") == sentences[:2]
    # a first sentence longer than allowed is cut at a word or clause break, keeping its citations
    assert trim_to_length(sentences[:1], 2, "en") == [{"text": "one two.", "clipped": True}]
    cited = [
        {"text": "The budget is 40,000 euros, most of it for panels, and the rest for trials.", "citations": ["c1"]}
    ]
    clipped = trim_to_length(cited, 10, "en")
    assert clipped == [
        {"text": "The budget is 40,000 euros, most of it for panels.", "citations": ["c1"], "clipped": True}
    ]
    assert draft_fits("word " * 50 + "[c1]", 60, "paragraphs", "en")
    assert draft_fits("word " * 10, 60, "paragraphs", "en") and not draft_fits("word " * 90, 60, "paragraphs", "en")
    assert not draft_fits("word " * 50, 60, "bullets", "en")
    assert not draft_fits("word " * 50, 60, "paragraphs", "zh")


def test_fallback_merge_keeps_citations_within_length() -> None:
    answers = [
        {"answer": "The budget is 40,000 euros. Most pays panels [c1].", "citations": ["c1"]},
        {"answer": "Trials start in June [c3].", "citations": ["c3"]},
    ]
    merged = fallback_merge("Falcon builds pumps [c0].", answers, 100, "en")
    expected = (
        "Falcon builds pumps [c0]. The budget is 40,000 euros. [c1] Most pays panels [c1]. Trials start in June [c3]."
    )
    assert merged == expected
    assert fallback_merge("", answers, 3, "en") == "The budget is 40,000 euros. [c1]"


def test_factcheck_stats_share() -> None:
    rows = [{"verdict": v} for v in ("supported", "supported", "fixed", "dropped", "unchecked")]
    stats = factcheck_stats(rows)
    assert stats["checked"] == 4 and stats["supported_share"] == 0.5 and stats["unchecked"] == 1
    assert factcheck_stats([])["supported_share"] is None


@pytest.mark.parametrize("collection", [False, True], ids=["one document", "collection"])
def test_expert_answer_keeps_only_citations_of_retrieved_chunks(collection: bool) -> None:
    doc = ingest(str(FALCON))
    others = [ingest(text="# Otters\n\nSea otters hold hands while they sleep.").doc_id] if collection else []
    sources = Sources(get_store(), [*others, doc.doc_id])
    cited, invented = sources.label(doc.doc_id, "c1"), sources.label(doc.doc_id, "c9")
    assert cited == ("2:c1" if collection else "c1")
    answer = f"The budget is 40,000 euros [{cited}] [{invented}]."
    fake = ScriptedChatModel(default=json.dumps({"answer": answer, "citations": [cited], "confidence": 0.9}))
    with use_chat_model(fake), track_usage() as usage:
        result = answer_question(
            "What budget did the committee approve?",
            "fact",
            DEFAULT_EXPERTS["fact"],
            sources=sources,
            llm=LLM("expert"),
            k=2,
        )
    assert result["status"] == "answered" and result["citations"] == [cited]
    assert f"[{invented}]" not in result["answer"] and f"[{cited}]" in result["answer"]
    assert cited in result["chunks"] and len(result["chunks"]) == 2
    prompt = str(fake.calls[0][-1].content)
    named = "Project Falcon · " if collection else ""  # a collection's excerpt names its document
    assert f"[{cited}] ({named}Project Falcon > Budget)" in prompt and "Question: What budget" in prompt
    assert usage["expert"]["calls"] == 1


def test_expert_not_found_and_citations_outside_the_retrieved_chunks() -> None:
    doc = ingest(str(FALCON))
    kwargs = {"sources": Sources(get_store(), [doc.doc_id]), "llm": LLM("expert", max_retries=1)}
    not_found = {"answer": "not found", "citations": ["c1"], "confidence": 0}
    with use_chat_model(ScriptedChatModel(default=json.dumps(not_found))):
        result = answer_question("Who won the 1998 world cup?", "fact", "facts", **kwargs)
    assert result["status"] == "not_found" and result["citations"] == [] and result["confidence"] == 0.0
    invented = {"answer": "The moon is made of cheese [c42].", "citations": ["c42"], "confidence": 0.7}
    fake = ScriptedChatModel(default=json.dumps(invented))
    with use_chat_model(fake), pytest.raises(ModelOutputError, match="ExpertAnswer"):
        answer_question("What is the moon made of?", "fact", "facts", k=2, **kwargs)
    assert len(fake.calls) == 2 and "does not match the required JSON schema" in str(fake.calls[1][-1].content)


def test_answer_cache_round_trip(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "answers.sqlite")
    key = AnswerCache.key(question=["budget"], expert="fact")
    assert cache.get(key) is None
    cache.put(key, {"status": "answered", "answer": "40,000 euros [c1]"})
    assert AnswerCache(tmp_path / "answers.sqlite").get(key) == {"status": "answered", "answer": "40,000 euros [c1]"}
    assert (
        AnswerCache.key(question=["budget"], expert="fact") == key != AnswerCache.key(question=["budget"], expert="x")
    )


def test_map_reduce_helpers() -> None:
    assert cite_chunk("One. Two [c1].", "c4") == "One. [c4] Two [c1]."
    assert is_none("NONE") and is_none("none.") and is_none("") and not is_none("The budget is set.")
    notes = ["a " * 10, "b " * 10, "c " * 10, "d " * 40]
    groups = group_notes(notes, 30)
    assert [len(g) for g in groups] == [2, 1, 1]
    assert sum(len(g) for g in groups) == len(notes)


@pytest.mark.parametrize("collection", [False, True], ids=["one document", "collection"])
def test_the_overview_samples_documents_without_headings(collection: bool) -> None:
    from nodes.summarize.editing import overview_of
    from stores.documents import get_document

    text = "\n\n".join(f"Part {i} talks about topic number {i} in some detail. " * 6 for i in range(12))
    doc = ingest(text=text, chunk_size=80, chunk_overlap=0)
    others = [ingest(text="# Otters\n\nSea otters hold hands while they sleep.").doc_id] if collection else []
    info = get_document("default", doc.doc_id)
    sources = Sources(get_store(), [*others, info.doc_id])
    overview = overview_of(sources)
    first = sources.label(info.doc_id, "c0")
    assert f"{info.chunks} chunks ({first} to {sources.label(info.doc_id, f'c{info.chunks - 1}')})" in overview
    led = [sources.locate(line[1:].split("]")[0]) for line in overview.splitlines() if line.startswith("[")]
    shown = [found[1] for found in led if found is not None and found[0] == info.doc_id]
    assert shown[0] == "c0" and int(shown[-1][1:]) >= info.chunks // 2  # its opening, then chunks spread over it
    assert len(shown) == (2 if not collection else 1) + 4  # the openings share the lead budget with the otters


def test_expert_prompt_version_tracks_the_prompts() -> None:
    from nodes.summarize.expert import expert_prompt_version

    assert expert_prompt_version("en") == expert_prompt_version("en")
    assert expert_prompt_version("en") != expert_prompt_version("zh")


def test_repeated_sentences_are_dropped() -> None:
    from nodes.summarize.sentences import dedupe_sentences

    sentences = [
        {"text": "The pump moves water from shallow wells into drip lines.", "citations": ["c0"]},
        {"text": "The budget is 40,000 euros.", "citations": ["c1"]},
        {"text": "The purpose of the pump is to move water from shallow wells into drip lines.", "citations": ["c0"]},
        {"text": "Budget: 40,000 euros.", "citations": ["c1"]},
    ]
    kept = dedupe_sentences(sentences)
    assert [s["text"] for s in kept] == [sentences[1]["text"], sentences[2]["text"]]


def test_uncited_sentences_get_citations_from_the_preferred_chunks() -> None:
    from nodes.summarize.fact_checker import retrieve_citations

    doc = ingest(str(FALCON))
    sentence = "The committee approved 40,000 euros and Alice Moreau leads the team."
    sources = Sources(get_store(), [doc.doc_id])
    overall = retrieve_citations(sources, sentence, 1)
    preferred = retrieve_citations(sources, sentence, 1, prefer=["c2"])
    assert preferred == ["c2"] and len(overall) == 1
    assert retrieve_citations(sources, sentence, 2, prefer=["c99"]) == retrieve_citations(sources, sentence, 2)


def test_coverage_counts_content_words_of_the_source() -> None:
    from nodes.summarize.fact_checker import grounded_fix
    from nodes.summarize.sentences import clean_sentence, coverage

    source = "The steering committee approved a budget of 40,000 euros in March."
    assert coverage("The committee approved 40,000 euros.", source) == 1.0
    assert coverage("The draft summary is empty.", source) == 0.0
    assert coverage("the of and", source) == 1.0
    assert coverage("委员会批准了预算", "指导委员会在三月批准了四万欧元的预算。") > 0.5
    assert clean_sentence("Budget is 40,000 euros. (cites c1, c2)") == "Budget is 40,000 euros."
    assert grounded_fix("The committee approved 40,000 euros [c1].", "The budget is 90,000 euros.", source)
    assert not grounded_fix("The budget is 90,000 euros.", "The budget is 90,000 euros [c1].", source)
    assert not grounded_fix("The draft summary is empty.", "x", source) and not grounded_fix("", "x", source)


@pytest.mark.parametrize("collection", [False, True], ids=["one document", "collection"])
def test_the_editor_reads_one_overview_of_its_sources(collection: bool) -> None:
    """Each document with its name, chunks and headings in the run's labels; query hits over all of them."""
    from nodes.summarize.editing import overview_of

    falcon = ingest(str(FALCON)).doc_id
    others = [ingest(text="# Otters\n\nSea otters hold hands while they sleep.").doc_id] if collection else []
    sources = Sources(get_store(), [*others, falcon])
    overview = overview_of(sources, "the budget")
    budget = sources.label(falcon, "c1")
    assert f"[{budget}] " in overview and "40,000 euros" in overview
    assert f"Project Falcon > Budget [{budget}]" in overview  # the heading, with the label of its first chunk
    assert overview.startswith(f"Documents: {len(others) + 1} (")
    assert f"Document: {sources.heading(falcon)}; " in overview
    if collection:
        assert "[2:c3] is chunk c3 of document 2" in overview
        assert "Document: [1] Otters; 1 chunks (1:c0 to 1:c0)" in overview
        assert "Sea otters hold hands" in overview  # the opening of each document
    else:
        assert "Document: Project Falcon; " in overview and "is chunk c3" not in overview and ":c" not in overview


def test_the_overview_of_a_big_collection_stays_bounded() -> None:
    from nodes.summarize.editing import overview_of

    docs = [ingest(text=f"# Note {i}\n\nNote {i} records reading number {i} of the gauge.").doc_id for i in range(18)]
    sources = Sources(get_store(), docs)
    overview = overview_of(sources, "gauge reading")
    assert sum(line.startswith("Document: ") for line in overview.splitlines()) == 15
    assert "(+3 more documents)" in overview and "Documents: 18 (" in overview
    assert len([line for line in overview.splitlines() if line.startswith("[")]) <= 4 + 3
