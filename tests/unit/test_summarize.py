"""The summarize graph end to end with scripted models: rounds, experts, merging, polish, fact-check."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

import graphs.summarize.graph as summarize
import nodes.summarize.expert as summarize_experts
from doubles.chat import ScriptedChatModel
from doubles.replies import summarize_chat_model as fake_chat_model
from doubles.replies import summarize_reply as scripted_reply
from graphs.summarize.graph import graph
from nodes.context import field_descriptions
from nodes.ingest import ingest
from nodes.summarize.context import SummarizeContext
from stores.checkpoint import open_checkpointer
from stores.errors import InputError, ModelError
from stores.models import ModelOutputError, use_chat_model
from stores.usage import usage_totals
from tests.fakes import length_finish_error

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def _system(messages: Sequence[BaseMessage]) -> str:
    return str(messages[0].content)


def _calls(fake: ScriptedChatModel, marker: str) -> list[list[BaseMessage]]:
    """Calls whose system prompt contains ``marker`` ('"questions"', '"answer"', '"draft"', '"verdicts"')."""
    return [c for c in fake.calls if marker in _system(c)]


FULL_DRAFT = (
    "Project Falcon builds solar pumps for farms [c0]. The committee approved a budget of 40,000 euros in March [c1]. "
    "Alice Moreau leads engineering [c2]. Trials run from June to September near Nakuru [c3]. "
    "Dust on panels is the main risk [c4]."
)


def _with_full_draft(messages: Sequence[BaseMessage]) -> str | None:
    """Expert and merge replies that carry the facts the polish replies of these tests use."""
    if '"answer"' in _system(messages):
        first = re.search(r"^\[(c\d+)\]", str(messages[-1].content), re.M)
        cid = first.group(1) if first else "c0"
        return json.dumps({"answer": FULL_DRAFT, "citations": [cid], "confidence": 0.9})
    if '"draft"' in _system(messages):
        return json.dumps(
            {"draft": FULL_DRAFT, "completeness": 4, "accuracy": 4, "coherence": 4, "done": False, "missing": ""}
        )
    return None


def assert_whole(out: dict[str, Any], sep: str = " ") -> None:
    """The summary is its sentences as written, in order, and it has some."""
    assert out["sentences"] and out["summary"] == sep.join(s["text"] for s in out["sentences"]), out["summary"]


def _run(fake: ScriptedChatModel, request: dict[str, Any], **context: Any) -> dict[str, Any]:
    with use_chat_model(fake):
        return graph.invoke(request, context=context)


def test_expert_editor_rounds_produce_a_cited_summary_and_a_log() -> None:
    fake = fake_chat_model()
    out = _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=2, questions_per_round=3)
    assert_whole(out)
    assert out["method"] == "expert-editor"
    assert out["rounds"] == 2 and out["stop_reason"] == "max_rounds"
    valid = {f"c{i}" for i in range(5)}
    assert out["sentences"] and all(s["citations"] and set(s["citations"]) <= valid for s in out["sentences"])
    assert [r["round"] for r in out["log"]] == [1, 2]
    first = out["log"][0]
    assert len(first["questions"]) == 3 and first["judgement"]["completeness"] == 3
    assert {q["expert"] for q in first["questions"]} == {"fact", "opinion", "structure"}
    assert all(q["status"] == "answered" and q["citations"] for q in first["questions"])
    assert set(out["usage"]) == {"questioner", "expert", "editor", "checker"}
    assert usage_totals(out["usage"])["calls"] == len(fake.calls)
    assert out["usage"]["expert"]["calls"] == sum(len(r["questions"]) for r in out["log"])
    assert out["factcheck"]["supported"] == len(out["sentences"])


def test_state_keeps_ids_not_the_document() -> None:
    fake = fake_chat_model()
    with use_chat_model(fake), open_checkpointer() as saver:
        g = summarize.builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "ids-only"}}
        g.invoke({"path": str(FALCON), "length": 60}, config=config, context={"max_rounds": 1})
        values = g.get_state(config).values
    text = FALCON.read_text()
    assert "committee will decide on a second" in text
    assert "committee will decide on a second" not in json.dumps(values)
    assert values["doc_id"] == ingest(str(FALCON)).doc_id and values["path"] == ""  # the id of the ingested file


def test_a_thread_can_run_again_on_another_document(tmp_path: Path) -> None:
    other = _write(tmp_path, "# Otters\n\n" + "Otters hold hands while they sleep so they do not drift apart. " * 12)
    with use_chat_model(fake_chat_model()), open_checkpointer() as saver:
        g = summarize.builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "reused"}}
        first = g.invoke({"path": str(FALCON), "length": 60}, config=config, context={"max_rounds": 1})
        second_doc = ingest(str(other)).doc_id
        second = g.invoke({"doc_id": second_doc, "length": 30}, config=config, context={"max_rounds": 1})
    assert first["doc_id"] != second["doc_id"] == second_doc
    assert "Otters" in second["summary"] and "Falcon" not in second["summary"]
    assert len(second["log"]) <= 1 and usage_totals(second["usage"])["calls"] < usage_totals(first["usage"])["calls"]


def test_editor_output_failing_the_schema_is_retried_then_the_round_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_RETRIES", "1")

    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"questions"' in _system(messages):
            return '{"questions": [{"question": "short?", "type": "gossip", "target_expert": "nobody"}]}'
        return scripted_reply(messages)

    fake = ScriptedChatModel(default=reply)
    out = _run(fake, {"path": str(FALCON), "length": 50}, max_rounds=2)
    assert len(_calls(fake, '"questions"')) == 2
    assert "does not match the required JSON schema" in str(_calls(fake, '"questions"')[1][-1].content)
    assert out["stop_reason"] == "editor_output_invalid" and out["rounds"] == 1
    assert out["log"][0]["stop"] == "editor_output_invalid" and out["log"][0]["questions"] == []
    assert not _calls(fake, '"answer"')
    assert_whole(out)
    assert all(s["citations"] for s in out["sentences"])


def test_a_failing_expert_marks_its_question_failed_and_the_round_goes_on() -> None:
    fake = ScriptedChatModel(default=scripted_reply, fail_on="Your speciality: how the document is organised")
    out = _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=1, questions_per_round=3)
    statuses = {q["expert"]: q for q in out["log"][0]["questions"]}
    assert statuses["structure"]["status"] == "failed" and "scripted failure" in statuses["structure"]["error"]
    assert statuses["fact"]["status"] == "answered" and statuses["opinion"]["status"] == "answered"
    assert out["log"][0]["failed"] == 1 and out["log"][0]["merged"] >= 1
    assert_whole(out)


def test_interrupted_round_resumes_without_redoing_finished_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    real = summarize_experts.answer_question
    attempts: dict[str, int] = {}

    def flaky(question: str, expert: str, *args: Any, **kwargs: Any) -> Any:
        attempts[expert] = attempts.get(expert, 0) + 1
        if expert == "opinion" and attempts[expert] == 1:
            raise RuntimeError("worker process lost")
        return real(question, expert, *args, **kwargs)

    monkeypatch.setattr(summarize_experts, "answer_question", flaky)
    fake = fake_chat_model()
    context = {"max_rounds": 1, "questions_per_round": 3, "answer_cache": False}
    with use_chat_model(fake), open_checkpointer() as saver:
        g = summarize.builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "resume-1"}}
        with pytest.raises(RuntimeError, match="worker process lost"):
            g.invoke({"path": str(FALCON), "length": 60}, config=config, context=context)
        assert attempts == {"fact": 1, "opinion": 1, "structure": 1}
        expert_calls = len(_calls(fake, '"answer"'))
        assert expert_calls == 2
        assert g.get_state(config).next == ("expert",)
        out = g.invoke(None, config=config, context=context)
    assert attempts == {"fact": 1, "opinion": 2, "structure": 1}
    assert len(_calls(fake, '"answer"')) == expert_calls + 1
    questions = out["log"][0]["questions"]
    assert sorted(q["expert"] for q in questions) == ["fact", "opinion", "structure"]
    assert all(q["status"] == "answered" for q in questions)
    assert_whole(out)
    assert out["usage"]["expert"]["calls"] == 3


def test_experts_run_in_parallel() -> None:
    context = {"max_rounds": 1, "questions_per_round": 4, "answer_cache": False}
    doc = ingest(str(FALCON))
    peaks = {}
    for name, config in (("sequential", {"max_concurrency": 1}), ("parallel", None)):
        fake = fake_chat_model(delay=0.3)  # each call lasts long enough for the others to start
        with use_chat_model(fake):
            graph.invoke({"doc_id": doc.doc_id, "length": 60}, config=config, context=context)
        assert len(_calls(fake, '"answer"')) == 4
        peaks[name] = fake.peak_concurrency
    assert peaks == {"sequential": 1, "parallel": 4}  # the 4 experts answer at the same time


def test_query_steers_the_editor_and_the_overview() -> None:
    fake = fake_chat_model()
    query = "summarize what was decided about the budget"
    out = _run(fake, {"path": str(FALCON), "query": query, "length": 60}, max_rounds=1)
    editor_prompt = str(_calls(fake, '"questions"')[0][-1].content)
    assert f"Focus of the summary: {query}" in editor_prompt
    assert "40,000 euros" in editor_prompt
    assert query in str(_calls(fake, '"draft"')[0][-1].content)
    assert_whole(out)


def test_custom_experts_and_router_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    experts = {"numbers": "figures, budgets and dates.", "people": "who does what."}
    fake = fake_chat_model()
    out = _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=1, questions_per_round=2, experts=experts)
    assert {q["expert"] for q in out["log"][0]["questions"]} == {"numbers", "people"}
    assert "- numbers: figures, budgets and dates." in _system(_calls(fake, '"questions"')[0])

    seen: list[tuple[str, dict[str, str], str]] = []

    def route_to_expert(question: str, candidates: dict[str, str], namespace: str) -> str:
        seen.append((question, candidates, namespace))
        return "people"

    monkeypatch.setattr("nodes.summarize.editing.route_to_expert", route_to_expert)
    out = _run(
        fake_chat_model(),
        {"path": str(FALCON), "length": 60},
        max_rounds=1,
        questions_per_round=2,
        experts=experts,
        expert_routing="router",
        answer_cache=False,
    )
    assert {q["expert"] for q in out["log"][0]["questions"]} == {"people"}
    assert len(seen) == 2 and seen[0][1] == experts and seen[0][2] == "default"


def test_answer_cache_skips_repeated_questions() -> None:
    doc = ingest(str(FALCON))
    first = fake_chat_model()
    _run(first, {"doc_id": doc.doc_id, "length": 60}, max_rounds=1, questions_per_round=3)
    again = fake_chat_model()
    out = _run(again, {"doc_id": doc.doc_id, "length": 80, "format": "bullets"}, max_rounds=1, questions_per_round=3)
    assert len(_calls(first, '"answer"')) == 3 and not _calls(again, '"answer"')
    assert all(q["cached"] for q in out["log"][0]["questions"])
    assert "expert" not in out["usage"]
    off = fake_chat_model()
    _run(off, {"doc_id": doc.doc_id, "length": 60}, max_rounds=1, questions_per_round=3, answer_cache=False)
    assert len(_calls(off, '"answer"')) == 3


def test_no_new_questions_stops_the_rounds() -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"questions"' in _system(messages):
            q = {"question": "What budget did the committee approve?", "type": "fact", "target_expert": "fact"}
            return json.dumps({"questions": [q, dict(q)]})
        return scripted_reply(messages)

    fake = ScriptedChatModel(default=reply)
    out = _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=3)
    assert [len(r["questions"]) for r in out["log"]] == [1, 0]
    assert out["stop_reason"] == "no_new_questions" and out["rounds"] == 2


def test_editor_satisfied_and_unchanged_draft_stop_early() -> None:
    def satisfied(messages: Sequence[BaseMessage]) -> str:
        if '"draft"' in _system(messages):
            data = json.loads(scripted_reply(messages))
            return json.dumps({**data, "done": True})
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=satisfied), {"path": str(FALCON), "length": 20}, max_rounds=3)
    assert out["stop_reason"] == "editor_satisfied" and out["rounds"] == 1
    # a satisfied editor whose draft is shorter than 75% of the length asked gets another round
    out = _run(ScriptedChatModel(default=satisfied), {"path": str(FALCON), "length": 150}, max_rounds=3)
    assert out["rounds"] > 1 and out["stop_reason"] != "editor_satisfied"

    def frozen(messages: Sequence[BaseMessage]) -> str:
        if '"draft"' in _system(messages):
            draft = "Project Falcon builds a solar-powered water pump for small farms in dry regions. [c0]"
            return json.dumps({"draft": draft, "completeness": 2, "accuracy": 4, "coherence": 4, "done": False})
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=frozen), {"path": str(FALCON), "length": 12}, max_rounds=4)
    assert out["stop_reason"] == "draft_unchanged" and out["rounds"] == 2
    assert out["log"][1]["draft_changed"] is False


def test_merge_failure_falls_back_to_the_cited_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_RETRIES", "0")

    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"draft"' in _system(messages):
            return "I merged everything nicely."
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=reply), {"path": str(FALCON), "length": 60}, max_rounds=1)
    assert "merge_error" in out["log"][0]
    assert_whole(out)
    assert all(s["citations"] for s in out["sentences"])


def test_a_merged_draft_that_ignores_the_answers_is_replaced() -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"draft"' in _system(messages):
            empty = {"draft": "The draft summary is empty.", "completeness": 1, "accuracy": 1, "coherence": 1}
            return json.dumps({**empty, "done": False, "missing": ""})
        if '"verdicts"' in _system(messages):
            return json.dumps(
                {"verdicts": [{"n": 1, "supported": False, "fix": "The draft summary is empty. (cites c3)"}]}
            )
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=reply), {"path": str(FALCON), "length": 60}, max_rounds=1)
    assert "merge_error" in out["log"][0]
    assert "draft summary" not in out["summary"]
    assert_whole(out)
    assert all(s["citations"] for s in out["sentences"])


def _polished_then_checked(polished: str, verdicts: list[dict[str, Any]]) -> ScriptedChatModel:
    """A model whose polish writes ``polished`` and whose fact-check returns ``verdicts``."""

    def reply(messages: Sequence[BaseMessage]) -> str:
        merged = _with_full_draft(messages)
        if merged is not None:
            return merged
        if "Draft:" in str(messages[-1].content):
            return polished
        if '"verdicts"' in _system(messages):
            return json.dumps({"verdicts": verdicts})
        return scripted_reply(messages)

    return ScriptedChatModel(default=reply)


def test_ungrounded_corrections_are_dropped_and_verbatim_sentences_kept_as_disputed() -> None:
    model = _polished_then_checked(
        "The budget is 90,000 euros [c1]. Falcon builds solar pumps for farms [c0]. "
        "The steering committee approved a budget of 40,000 euros in March [c1].",
        [
            {"n": 1, "supported": False, "fix": "The budget is unknown to the draft. (cites c1)"},
            {"n": 2, "supported": True, "fix": ""},
            {"n": 3, "supported": False, "fix": ""},
        ],
    )
    request = {"path": str(FALCON), "length": 100, "format": "bullets"}
    out = _run(model, request, max_rounds=1, length_fit="trim")
    assert [(s["text"], s["verdict"]) for s in out["sentences"]] == [
        ("Falcon builds solar pumps for farms.", "supported"),
        ("The steering committee approved a budget of 40,000 euros in March.", "disputed"),
    ]
    assert out["factcheck"]["dropped"] == 1 and out["factcheck"]["disputed"] == 1
    assert out["factcheck"]["supported_share"] == round(1 / 3, 4)


def test_an_empty_or_stray_polish_keeps_the_draft() -> None:
    for polished in ("", "Here is the summary you asked for, written with care and attention."):

        def reply(messages: Sequence[BaseMessage], polished: str = polished) -> str:
            if "Draft:" in str(messages[-1].content):
                return polished
            return scripted_reply(messages)

        out = _run(ScriptedChatModel(default=reply), {"path": str(FALCON), "length": 60, "format": "bullets"})
        assert out["summary"].startswith("- Project Falcon builds")
        assert all(s["citations"] for s in out["sentences"])


def test_polish_writes_bullets_in_the_requested_length() -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        merged = _with_full_draft(messages)
        if merged is not None:
            return merged
        if "Draft:" in str(messages[-1].content) and "Layout: a bullet list" in _system(messages):
            return (
                "- The committee approved 40,000 euros in March [c1].\n- Alice Moreau leads engineering [c2].\n"
                "- Trials run from June to September near Nakuru [c3].\n- Dust on panels is the main risk [c4]."
            )
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=reply), {"path": str(FALCON), "length": 12, "format": "bullets"}, max_rounds=1)
    lines = out["summary"].splitlines()
    assert lines and all(line.startswith("- ") for line in lines)
    assert len(lines) == 2  # trimmed to whole sentences within 1.3 x 12 words
    assert out["sentences"][0]["citations"] == ["c1"]


def test_factcheck_fixes_and_drops_unsupported_sentences() -> None:
    polished = (
        "Project Falcon builds a solar pump for farms [c0]. The budget is 90,000 euros [c1]. "
        "Aliens fund the project [c2]."
    )
    verdicts = [
        {"n": 1, "supported": True, "fix": ""},
        {"n": 2, "supported": False, "fix": "The budget is 40,000 euros [c1]."},
        {"n": 3, "supported": False, "fix": ""},
    ]
    request = {"path": str(FALCON), "length": 100, "format": "bullets"}
    out = _run(_polished_then_checked(polished, verdicts), request, max_rounds=1, length_fit="trim")
    texts = [s["text"] for s in out["sentences"]]
    assert texts == ["Project Falcon builds a solar pump for farms.", "The budget is 40,000 euros."]
    assert [s["verdict"] for s in out["sentences"]] == ["supported", "fixed"]
    assert "Aliens" not in out["summary"]
    assert out["factcheck"] | {"supported_share": None} == out["factcheck"] | {
        "sentences": 3,
        "checked": 3,
        "supported": 1,
        "fixed": 1,
        "dropped": 1,
        "supported_share": None,
    }
    marked = _run(
        _polished_then_checked(polished, verdicts), request, max_rounds=1, factcheck="mark", length_fit="trim"
    )
    assert [s["verdict"] for s in marked["sentences"]] == ["supported", "unsupported", "unsupported"]
    assert "90,000" in marked["summary"]


def test_cut_off_checker_reply_leaves_sentences_unchecked() -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"verdicts"' in _system(messages):
            raise length_finish_error()
        return scripted_reply(messages)

    out = _run(ScriptedChatModel(default=reply), {"path": str(FALCON), "length": 60}, max_rounds=1)
    assert_whole(out)
    assert out["factcheck"]["unchecked"] == len(out["sentences"]) > 0
    assert {s["verdict"] for s in out["sentences"]} == {"unchecked"}


def test_an_unreachable_model_is_an_error_not_a_quiet_stop() -> None:
    import httpx2
    import openai

    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"questions"' in _system(messages):
            raise openai.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions"))
        return scripted_reply(messages)

    fake = ScriptedChatModel(default=reply)
    with pytest.raises(ModelError, match="cannot be reached"):
        _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=1)
    assert len(_calls(fake, '"questions"')) == 2  # the node's retry policy tried again


def test_factcheck_evidence_is_the_cited_chunk() -> None:
    fake = fake_chat_model()
    _run(fake, {"path": str(FALCON), "length": 60}, max_rounds=1, questions_per_round=2)
    check = str(_calls(fake, '"verdicts"')[0][-1].content)
    evidence = check.split("Sentences:")[0]
    cited = set(re.findall(r"cites (c\d+)", check))
    assert cited and all(f"[{cid}]" in evidence for cid in cited)


def test_map_reduce_baseline_collapses_under_the_token_limit() -> None:
    fake = fake_chat_model()
    out = _run(
        fake, {"path": str(FALCON), "length": 60, "method": "map-reduce"}, collapse_token_limit=40, factcheck="mark"
    )
    assert out["method"] == "map-reduce" and out["rounds"] == 0 and out["stop_reason"] == "baseline"
    assert len([c for c in fake.calls if "Excerpt [" in str(c[-1].content)]) == 5
    collapses = [c for c in fake.calls if "Merge these notes" in _system(c)]
    assert len(collapses) == 3  # the five notes merged, as the limit asks, until they fit
    assert_whole(out)
    assert all(s["citations"] for s in out["sentences"])
    assert set(out["usage"]) >= {"worker", "manager", "checker"}


def test_refine_baseline_reads_every_chunk_in_order() -> None:
    fake = fake_chat_model()
    out = _run(fake, {"path": str(FALCON), "length": 80, "method": "refine"}, factcheck="mark")
    steps = [c for c in fake.calls if "Summary so far:" in str(c[-1].content)]
    assert [re.search(r"New excerpt \[(c\d+)\]", str(c[-1].content)).group(1) for c in steps] == [
        f"c{i}" for i in range(5)
    ]
    assert_whole(out)
    assert out["usage"]["worker"]["calls"] == 5


def _write(folder: Path, text: str, name: str = "doc.md") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_short_document_is_its_own_summary(tmp_path: Path) -> None:
    fake = fake_chat_model()
    out = _run(fake, {"path": str(_write(tmp_path, "Otters hold hands while they sleep."))})
    assert out["summary"] == "Otters hold hands while they sleep."
    assert out["stop_reason"] == "document_shorter_than_summary" and not fake.calls
    assert out["sentences"] == [
        {
            "text": "Otters hold hands while they sleep.",
            "citations": ["c0"],
            "sources": [{"label": "c0.1", "document": "Otters hold hands while they sleep."}],
            "verdict": "source",
            "origin": "source",
        }
    ]


def test_one_paragraph_document_is_summarized_in_one_call(tmp_path: Path) -> None:
    paragraph = " ".join(
        f"Sentence {i} says that the pilot plant in Kisumu produced {i * 10} litres of water on day {i}."
        for i in range(1, 16)
    )
    fake = fake_chat_model()
    out = _run(fake, {"path": str(_write(tmp_path, paragraph)), "length": 30})
    assert out["stop_reason"] == "single_chunk" and out["rounds"] == 0
    assert not _calls(fake, '"questions"') and len(_calls(fake, '"verdicts"')) == 1
    assert_whole(out)
    assert out["sentences"][0]["citations"] == ["c0"]


def test_bad_requests_are_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("   \n")
    with use_chat_model(fake_chat_model()):
        with pytest.raises(InputError, match="empty"):
            graph.invoke({"path": str(empty)})
        with pytest.raises(InputError, match="length"):
            graph.invoke({"path": str(FALCON), "length": 3})
        with pytest.raises(InputError, match="not ingested"):
            graph.invoke({"doc_id": "0123456789abcdef"})
        with pytest.raises(InputError, match="give one of doc_id, path or text"):
            graph.invoke({})
        with pytest.raises(InputError, match="max_rounds"):
            graph.invoke({"path": str(FALCON)}, context={"max_rounds": 0})
        with pytest.raises(InputError, match="method"):
            graph.invoke({"path": str(FALCON), "method": "magic"})  # type: ignore[typeddict-item]


def test_chinese_document_gets_chinese_prompts_and_summary(tmp_path: Path) -> None:
    text = (
        "# 猎鹰项目\n\n猎鹰项目为干旱地区的小农场制造太阳能水泵。"
        "水泵把浅井里的水送进滴灌管道，农场不再需要柴油发电机。\n\n"
        "## 预算\n\n指导委员会在三月批准了四万欧元的预算。大部分用于太阳能板和水泵，六千欧元留给田间试验。\n\n"
        "## 团队\n\n爱丽丝负责工程团队和水泵设计。鲍勃负责采购和供应商合同。法图玛协调试验农场并培训农民。\n\n"
        "## 日程\n\n田间试验六月在肯尼亚纳库鲁附近的三个农场开始，九月结束。十月提交关于节水和可靠性的报告。\n"
    )
    fake = fake_chat_model()
    out = _run(fake, {"path": str(_write(tmp_path, text, "zh.md")), "length": 40}, max_rounds=1, questions_per_round=2)
    assert "你是一个长文档摘要团队的主编" in _system(_calls(fake, '"questions"')[0])
    assert "简体中文" in _system(_calls(fake, '"answer"')[0])
    assert_whole(out, sep="")  # Chinese sentences are joined without a space
    assert " " not in out["summary"].replace("- ", "")[:10]
    assert all(s["citations"] for s in out["sentences"])
    english = _run(
        fake_chat_model(), {"path": str(_write(tmp_path, text, "zh.md")), "length": 40, "language": "en"}, max_rounds=1
    )
    assert_whole(english)  # written in English: sentences joined with a space


def test_langserve_route_summarizes(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    doc = ingest(str(FALCON), namespace="api")
    with TestClient(create_app(chat_model=fake_chat_model())) as client:
        payload = {
            "input": {"doc_id": doc.doc_id, "length": 60},
            "config": {"configurable": {"namespace": "api", "max_rounds": 1, "questions_per_round": 2}},
        }
        response = client.post("/summarize/invoke", json=payload)
    assert response.status_code == 200, response.text
    out = response.json()["output"]
    assert_whole(out)
    assert out["rounds"] == 1 and len(out["log"][0]["questions"]) == 2


def test_context_fields_are_described() -> None:
    descriptions = field_descriptions(SummarizeContext)
    assert {"max_rounds", "experts", "expert_routing", "question_model", "factcheck"} <= set(descriptions)
    assert all(text.strip() for text in descriptions.values())


def test_a_summary_with_no_usable_sentence_is_an_error() -> None:
    mute = ScriptedChatModel(default="")
    with pytest.raises(ModelOutputError, match="summary came out empty"):
        _run(mute, {"path": str(FALCON), "length": 60}, max_rounds=1)
