"""Coverage before style: the editor's questions aim at the parts of the focus and the topics not yet covered."""

from __future__ import annotations

import re
from pathlib import Path

from doubles.replies import summarize_chat_model
from graphs.summarize.graph import graph
from nodes.summarize.gaps import missing_parts, uncovered_topics
from stores.models import use_chat_model
from stores.vectorstore import Hit

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def _hit(cid: str, text: str) -> Hit:
    return Hit(id=f"d:{cid}", text=text, metadata={"chunk_id": cid}, score=0.0)


CHUNKS = [
    _hit("c0", "Marketing: the remote needs a rubber case. The rubber case is soft. Rubber is cheap."),
    _hit("c1", "Project Manager: the battery should last a year. A kinetic battery is costly. Battery life matters."),
    _hit("c2", "Industrial Designer: the buttons should glow. Glowing buttons help at night. The remote is small."),
]


def test_missing_parts_of_the_focus() -> None:
    assert missing_parts("", "en") == ["who", "what was decided", "why", "what next"]
    draft = "After a vote, Marketing decided on rubber because it is cheap; the team will test it next week."
    assert missing_parts(draft, "en") == []
    assert missing_parts("The rubber case is soft.", "en") == ["who", "what was decided", "why", "what next"]
    assert missing_parts("经理决定使用橡胶，因为它便宜。", "zh") == ["下一步"]


def test_uncovered_topics_are_the_distinctive_words_the_draft_lacks() -> None:
    topics = uncovered_topics(CHUNKS, "")
    assert [t.split("]")[0] + "]" for t in topics] == ["[c0]", "[c1]", "[c2]"]
    assert "rubber" in topics[0] and "battery" in topics[1] and "buttons" in topics[2]
    covered = uncovered_topics(CHUNKS, "The rubber case is soft and cheap. The battery should last; kinetic is costly.")
    assert [t.split()[0] for t in covered] == ["[c2]"]
    assert uncovered_topics(CHUNKS, "", focus=["c1"]) == [topics[1]]


def test_the_editor_is_asked_about_what_the_draft_does_not_cover_yet() -> None:
    fake = summarize_chat_model()
    with use_chat_model(fake):
        out = graph.invoke({"path": str(FALCON), "length": 120}, context={"max_rounds": 2, "questions_per_round": 3})
    prompts = [str(c[-1].content) for c in fake.calls if '"questions"' in str(c[0].content)]
    assert len(prompts) == 2
    first, second = prompts

    def listed(prompt: str) -> list[str]:
        block = prompt.split("does not cover yet (chunk and its key words):")[1].split("Questions already asked:")[0]
        return re.findall(r"^- \[(c\d+)\]", block, re.M)

    assert "Parts of the focus the draft does not answer yet: who, what was decided, why, what next" in first
    assert len(listed(first)) >= 3
    # after a round the draft covers some chunks: they are no longer listed, and the log says what was aimed at
    assert set(listed(second)) < set(listed(first))
    assert out["log"][0]["aimed_at"]["parts"] == ["who", "what was decided", "why", "what next"]
    assert [t.split("]")[0][1:] for t in out["log"][0]["aimed_at"]["topics"]] == listed(first)
