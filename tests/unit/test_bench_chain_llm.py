from __future__ import annotations

import json
from pathlib import Path

from bench.chain_llm import METHODS, as_document, run_llm
from bench.qa_data import Paragraph, QAItem
from doubles.chat import ScriptedChatModel
from stores.models import use_chat_model
from tests.fakes import quoting

ITEM = QAItem(
    id="q1",
    source="test",
    question="Which river flows through Paris?",
    answers=["the Seine", "Seine"],
    paragraphs=[
        Paragraph("Paris", "Paris is the capital of France. The Seine flows through it.", True),
        Paragraph("Rome", "Rome lies on the Tiber.", False),
        Paragraph("Oslo", "Oslo is in Norway.", False),
    ],
)


def test_document_has_one_section_per_paragraph() -> None:
    assert as_document(ITEM).split("\n\n")[:2] == [
        "# Paris",
        "Paris is the capital of France. The Seine flows through it.",
    ]


def test_run_llm_scores_every_method_and_replays_from_the_journal(tmp_path: Path) -> None:
    answer = json.dumps({"answer": "Seine", "evidence": ["c0"], "explanation": "It flows through Paris [c0]."})
    worker = quoting([("Seine", "")])
    model = ScriptedChatModel(
        rules=[("manager of a chain", answer), ("Answer the question using only", answer)], default=worker
    )
    journal = tmp_path / "journal.jsonl"
    with use_chat_model(model):
        result = run_llm([ITEM], journal, embedder="hash")
    assert set(result) == set(METHODS)
    for method in METHODS:
        assert result[method]["em"] == 1.0 and result[method]["f1"] == 1.0
        assert result[method]["tokens"] > 0
    assert result["chow-liu-bfs"]["calls"] == 4 and result["topk"]["calls"] == 1
    calls = len(model.calls)
    with use_chat_model(model):
        again = run_llm([ITEM], journal, embedder="hash")
    assert again == result and len(model.calls) == calls
    assert len(journal.read_text().splitlines()) == len(METHODS)
