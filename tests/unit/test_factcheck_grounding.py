"""The grounding check of the fact-checker and how it combines with the model's verdict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel
from doubles.replies import summarize_reply
from graphs.summarize.graph import graph
from nodes.collection.sources import Sources
from nodes.ingest import ingest
from nodes.summarize.fact_checker import check_sentences, factcheck_stats
from nodes.summarize.grounding import grounding_problems, names_in, numbers_in
from stores.models import llm_for, use_chat_model
from stores.usage import track_usage
from stores.vectorstore import get_store
from tests.fakes import length_finish_error

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"
BUDGET = (
    "The steering committee approved a budget of 40,000 euros in March. Most of it pays for solar panels and "
    "pumps; 6,000 euros are kept for field trials, and 2,500 euros for training farmers. The committee rejected "
    "a request for a second prototype."
)
TEAM = "Alice Moreau: I lead the engineering team and own the pump design.\nBob Chen: I manage procurement."


def test_numbers_are_read_in_digits_and_words_alike() -> None:
    assert numbers_in("a budget of 40,000 euros") == {"40000"} == numbers_in("forty thousand euros")
    assert numbers_in("fifty million, 50 million") == {"50000000"}
    assert numbers_in("one hundred and five buttons, twenty one days, 12.50 euros") == {"105", "21", "12.5"}
    # "one", "two", "three" alone are other words or inferred counts, not figures
    assert numbers_in("no one knows the two reasons") == set()


def test_names_are_capitalised_runs_after_the_first_word_and_ids() -> None:
    found = names_in("Industrial Designer said that Project Manager agreed with Marketing's plan and mn005.")
    assert found == {"Industrial Designer", "Project Manager", "Marketing", "mn005"}
    assert names_in("The group met. However, they left.") == set()


def test_grounding_finds_each_kind_of_problem() -> None:
    assert grounding_problems("The committee approved a budget of 40,000 euros in March.", BUDGET) == []
    assert grounding_problems("The committee approved forty thousand euros.", BUDGET) == []
    assert grounding_problems("The committee approved a budget of 90,000 euros.", BUDGET) == [
        "number 90000 is not in the cited chunks"
    ]
    assert grounding_problems("Carol Diaz leads the engineering team.", TEAM) == [
        "name Carol Diaz is not in the cited chunks"
    ]
    assert grounding_problems("Users want a kinetic battery and a rubber case.", BUDGET)[0].startswith("claim: 0%")
    assert grounding_problems("The committee did not approve the budget in March.", BUDGET) == [
        "negation: no passage of the cited chunks on this says no"
    ]
    # the same negation where the source says no is grounded
    said_no = BUDGET + " The committee did not approve a second prototype yet."
    assert grounding_problems("The committee did not approve a second prototype.", said_no) == []


def test_attribution_is_checked_only_when_asked() -> None:
    swapped = "Bob Chen leads the engineering team and owns the pump design."
    assert grounding_problems("Alice Moreau leads the engineering team.", TEAM, attribution_words=2) == []
    assert grounding_problems(swapped, TEAM, attribution_ratio=0) == []
    assert grounding_problems(swapped, TEAM, attribution_ratio=0, attribution_words=2) == [
        "name Bob Chen is in the cited chunks but not with this claim"
    ]


def test_acronyms_spelt_out_and_short_endings_still_match() -> None:
    source = "User Interface: the L_C_D_ screen is nice and the Industrial Designers agree."
    assert grounding_problems("The Industrial Designer liked the LCD screen.", source) == []
    assert grounding_problems("The UI designer thinks the screen is nice.", source) == []
    assert grounding_problems("The PM thinks the screen is nice.", source) == ["name PM is not in the cited chunks"]


MEETING = (
    "Project Manager: Welcome. Today we decide on the buttons and the price.\n"
    "Industrial Designer: Big buttons are easier to use, and rubber makes it bust-free.\n"
    "Marketing: It should look nice, or we won't sell it. And it won't need many batteries.\n"
    "User Interface: A small LED in the corner tells the users it works."
)


def test_paraphrased_words_are_matched_by_stem() -> None:
    source = "Marketing: We recognize that the designs are colourful."
    # no content word of the sentence is in the source as written; each is by stem
    assert grounding_problems("Recognizing the design and colours.", source, min_coverage=0.5) == []
    assert grounding_problems("A cheap titanium case.", source, min_coverage=0.5)[0].startswith("claim: 0%")


def test_names_do_not_count_towards_the_claim() -> None:
    # the speakers' names are in every meeting: they alone do not ground a claim
    sentence = "Then Marketing and Industrial Designer wanted a solar-powered kinetic case."
    assert grounding_problems(sentence, MEETING) == ["claim: 0% of its content words are in the cited chunks"]


def test_a_claim_given_to_the_wrong_speaker_is_flagged() -> None:
    assert grounding_problems("Industrial Designer said big buttons are easier to use and bust-free.", MEETING) == []
    assert grounding_problems("Marketing said big buttons are easier to use and bust-free.", MEETING) == [
        "name Marketing is in the cited chunks but not with this claim: another speaker says it"
    ]
    # either speaker of a sentence that names two may have said it
    assert grounding_problems("Marketing asked Industrial Designer about rubber and big buttons.", MEETING) == []
    # not in a source without speaker turns
    assert grounding_problems("Marketing said big buttons are easier to use.", MEETING.replace(":", "")) == []


def test_the_subject_of_a_report_must_be_a_speaker() -> None:
    assert grounding_problems("LED also concluded that it tells the users it works.", MEETING) == [
        "name LED is no speaker of the cited chunks"
    ]
    # a word the source writes in lower case is no name: "Users" is not checked as a speaker
    assert grounding_problems("Users said a small LED tells them it works.", MEETING) == []
    # a speaker label shortened or cut ("User Inter face") is still that speaker
    assert grounding_problems("User Inter face suggested a small LED in the corner.", MEETING) == []


def test_a_negation_must_be_on_the_same_words_in_the_source() -> None:
    # the source negates near these words, but not the claim's own word ("look")
    assert grounding_problems("Marketing said it should not look nice.", MEETING) == [
        "negation: no passage of the cited chunks on this says no"
    ]
    assert grounding_problems("Marketing said it would not need many batteries.", MEETING) == []
    assert grounding_problems("Marketing said they would not sell it otherwise.", MEETING) == []
    # "unnecessary" says no to "necessary"
    source = "Project Manager: Unnecessary functions go."
    assert grounding_problems("The functions are not necessary.", source) == []
    # a negated word the source lacks is left to the claim check
    assert grounding_problems("Marketing said it should look nice, not expensive.", MEETING) == []
    # "not only ... but also" denies nothing
    assert grounding_problems("Marketing said it should not only look nice but also sell.", MEETING) == []
    # a source says no in other words too: "without", "rejected", "disagree"
    source = "Industrial Designer: We go without a screen, it costs too much.\nMarketing: Fine, I disagree on colour."
    assert grounding_problems("Industrial Designer said the remote will not have a screen.", source) == []
    assert grounding_problems("Marketing did not agree on the colour.", source) == []
    # a negation reaches past degree and quantity words to what it negates: "buttons", not "many"
    source = "Industrial Designer: Not too much buttons, please.\nMarketing: Many users like it."
    assert grounding_problems("Industrial Designer wanted not as many buttons.", source) == []


def test_small_number_words_count_in_a_compound() -> None:
    assert numbers_in("a three-point scale") == {"3"} and numbers_in("the three of us") == set()
    source = "Marketing: We rate each criterion on a seven-point scale."
    assert grounding_problems("Marketing used a seven-point scale for each criterion.", source) == []
    assert grounding_problems("Marketing used a three-point scale for each criterion.", source) == [
        "number 3 is not in the cited chunks"
    ]


def _sources() -> Sources:
    return Sources(get_store("default", "hash"), [ingest(str(FALCON)).doc_id])


def _checker(supported: bool) -> ScriptedChatModel:
    def reply(messages: Sequence[BaseMessage]) -> str:
        count = str(messages[-1].content).split("Sentences:")[1].count("(cites ")
        return json.dumps({"verdicts": [{"n": i, "supported": supported, "fix": ""} for i in range(1, count + 1)]})

    return ScriptedChatModel(default=reply)


SENTENCES = [
    {"text": "The steering committee approved a budget of 40,000 euros in March.", "citations": ["c1"]},
    {"text": "The steering committee approved a budget of 90,000 euros in March.", "citations": ["c1"]},
    {"text": "Fatuma Njeri leads the engineering team and owns the pump design.", "citations": ["c2"]},
]


def test_grounding_only_needs_no_model_and_says_no() -> None:
    sources = _sources()
    with track_usage() as usage:
        checked = check_sentences(SENTENCES, sources=sources, llm=None, mode="mark", checks="grounding")
    assert usage == {}
    assert [c["verdict"] for c in checked] == ["supported", "unsupported", "supported"]
    assert checked[1]["flagged_by"] == ["grounding"] and checked[1]["grounding"] == [
        "number 90000 is not in the cited chunks"
    ]
    assert checked[1]["model_supported"] is None


def test_combined_check_flags_what_either_check_flags_and_says_which() -> None:
    sources = _sources()
    with use_chat_model(_checker(True)):
        llm = llm_for("checker", None)
        checked = check_sentences(SENTENCES, sources=sources, llm=llm, mode="fix", checks="both")
        model_only = check_sentences(SENTENCES, sources=sources, llm=llm, mode="fix", checks="model")
    # the model confirmed all three; grounding caught the wrong number, the name swap is not a grounding error
    assert [c["verdict"] for c in checked] == ["supported", "dropped", "supported"]
    assert checked[1]["flagged_by"] == ["grounding"] and checked[1]["model_supported"] is True
    assert [c["verdict"] for c in model_only] == ["supported", "supported", "supported"]
    stats = factcheck_stats(checked)
    assert stats["flagged_by"] == {"model": 0, "grounding": 1, "both": 0} and stats["dropped"] == 1
    with use_chat_model(_checker(False)):
        both = check_sentences(SENTENCES, sources=sources, llm=llm_for("checker", None), mode="mark", checks="both")
    assert [c["flagged_by"] for c in both] == [["model"], ["model", "grounding"], ["model"]]
    assert factcheck_stats(both)["flagged_by"] == {"model": 3, "grounding": 1, "both": 1}


def test_a_weak_grounding_flag_marks_a_sentence_without_dropping_it() -> None:
    sources = _sources()
    negated = [{"text": "The steering committee did not approve the budget in March.", "citations": ["c1"]}]
    with use_chat_model(_checker(True)):
        checked = check_sentences(negated, sources=sources, llm=llm_for("checker", None), mode="fix")
    assert checked[0]["verdict"] == "disputed" and checked[0]["flagged_by"] == ["grounding"]


def test_a_fix_that_fails_grounding_is_not_accepted() -> None:
    sources = _sources()

    def reply(messages: Sequence[BaseMessage]) -> str:
        fix = "The steering committee approved a budget of 70,000 euros in March [c1]."
        return json.dumps({"verdicts": [{"n": 1, "supported": False, "fix": fix}]})

    with use_chat_model(ScriptedChatModel(default=reply)):
        checked = check_sentences(SENTENCES[1:2], sources=sources, llm=llm_for("checker", None), mode="fix")
    assert checked[0]["verdict"] == "dropped" and checked[0]["flagged_by"] == ["model", "grounding"]


def test_the_summary_says_which_check_flagged_a_kept_sentence() -> None:
    text = "The committee did not approve a budget of 40,000 euros in March [c1]. Falcon builds solar pumps [c0]."

    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"answer"' in str(messages[0].content):
            return json.dumps({"answer": text, "citations": ["c0", "c1"], "confidence": 0.9})
        if '"draft"' in str(messages[0].content):
            return json.dumps({"draft": text, "completeness": 4, "accuracy": 4, "coherence": 4, "done": True})
        if "Draft:" in str(messages[-1].content):
            return text
        return summarize_reply(messages)

    with use_chat_model(ScriptedChatModel(default=reply)):
        out = graph.invoke(
            {"path": str(FALCON), "length": 100, "format": "bullets"},
            context={"max_rounds": 1, "length_fit": "trim", "factcheck": "mark"},
        )
    flagged = [s for s in out["sentences"] if s.get("flagged_by")]
    assert flagged and flagged[0]["verdict"] == "unsupported" and flagged[0]["flagged_by"] == ["grounding"]
    assert flagged[0]["problems"][0].startswith("negation")
    assert out["factcheck"]["flagged_by"]["grounding"] >= 1
    with use_chat_model(ScriptedChatModel(default=reply)), pytest.raises(Exception, match="factcheck_checks"):
        graph.invoke({"path": str(FALCON)}, context={"factcheck_checks": "vibes"})


def test_a_failed_model_check_leaves_sentences_unchecked_with_their_grounding_problems() -> None:
    sources = _sources()

    def cut(messages: Sequence[BaseMessage]) -> str:
        raise length_finish_error()

    with use_chat_model(ScriptedChatModel(default=cut)):
        checked = check_sentences(SENTENCES, sources=sources, llm=llm_for("checker", None), mode="fix")
    assert [c["verdict"] for c in checked] == ["unchecked"] * 3
    assert checked[1]["flagged_by"] == ["grounding"] and checked[1]["grounding"]
    assert factcheck_stats(checked)["unchecked"] == 3


def test_transcript_markup_and_fillers_do_not_hide_a_claim_from_grounding() -> None:
    source = "Project Manager: Channel {disfmarker} uh Zero to nine.\nMarketing: yes, agreed on the the rubber case."
    assert grounding_problems("Project Manager: Channel Zero to nine.", source) == []
    # two names side by side ("Project Manager Marketing") are each in the source
    assert grounding_problems("Project Manager Marketing agreed on the rubber case.", source) == []
    assert grounding_problems("Project Designer agreed on the rubber case.", source) == [
        "name Project Designer is not in the cited chunks"
    ]


def test_the_command_line_lists_flagged_sentences_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces.cli import EXIT_OK, main

    def reply(messages: Sequence[BaseMessage]) -> str:
        if "Draft:" in str(messages[-1].content):
            return "Project Falcon builds solar pumps for 90 farms [c0]."
        return summarize_reply(messages)

    with use_chat_model(ScriptedChatModel(default=reply)):
        code = main(["summarize", str(FALCON), "--length", "12", "--format", "bullets", "--factcheck", "mark"])
    assert code == EXIT_OK
    err = capsys.readouterr().err
    assert "unsupported (grounding): Project Falcon builds solar pumps for 90 farms." in err
    assert "[number 90 is not in the cited chunks]" in err
