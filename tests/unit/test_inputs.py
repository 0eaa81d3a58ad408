"""Bad input ends in exit code 2 / HTTP 400 with a one-line message that names the real problem."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_chat_model as fake_chat_model
from doubles.replies import offload_reply, summarize_reply
from graphs.ingest import graph as ingest
from graphs.route.graph import graph as route
from graphs.summarize.graph import graph as summarize
from nodes.ingest import DOCUMENT_FIELDS, read_source
from nodes.ingest import ingest as ingest_file
from nodes.summarize.length import length_units
from stores.documents import list_documents
from stores.errors import InputError
from stores.models import ModelError, use_chat_model
from stores.questions import MAX_QUESTION_CHARS
from stores.text import LONG_RUN, content_hash, count_tokens
from surfaces import cli
from surfaces.registry import compile_with
from tests.fakes import quoting

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"
LONG = "why " * (MAX_QUESTION_CHARS // 4 + 1)


def test_a_negative_chunk_size_is_named_as_such() -> None:
    with pytest.raises(InputError, match="chunk_size must be at least 50 tokens, got -100"):
        ingest.invoke({"text": "Some text."}, context={"chunk_size": -100})


def test_summary_length_zero_is_refused_not_replaced_by_the_default() -> None:
    doc_id = ingest_file(str(FALCON)).doc_id
    with use_chat_model(fake_chat_model()), pytest.raises(InputError, match="length must be between 10 and 2000"):
        summarize.invoke({"doc_id": doc_id, "length": 0})


def test_one_length_limit_for_questions_queries_and_requests() -> None:
    doc_id = ingest_file(str(FALCON)).doc_id
    limit = f"the limit is {MAX_QUESTION_CHARS}"
    with use_chat_model(fake_chat_model()):
        with pytest.raises(InputError, match=f"the query is {len(LONG)} characters long; {limit}"):
            summarize.invoke({"doc_id": doc_id, "query": LONG})
        from graphs.offload.graph import graph as chat

        with pytest.raises(InputError, match=f"the question is {len(LONG)} characters long; {limit}"):
            chat.invoke({"question": LONG, "doc_id": doc_id})
        registry = [
            {"name": "sales", "description": "sales charts", "tools": [{"name": "plot", "description": "plot"}]}
        ]
        with pytest.raises(InputError, match=f"the request is {len(LONG)} characters long; {limit}"):
            route.invoke({"request": LONG, "registry": "r", "registry_data": registry})


def test_chat_script_that_is_binary_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "questions.txt"
    script.write_bytes(b"\xff\xfe\x00\x81binary\x00\xc3")
    with use_chat_model(fake_chat_model()):
        code = cli.main(["chat", str(FALCON), "--script", str(script), "-q", "--embedder", "hash"])
    err = capsys.readouterr().err
    assert code == 2 and "is not a UTF-8 text file of questions" in err and "Traceback" not in err


def test_canvas_out_on_a_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "page.html"
    folder.mkdir()
    with use_chat_model(fake_chat_model()):
        code = cli.main(["canvas", str(FALCON), "--out", str(folder), "-q"])
        assert code == 2 and "is a folder" in capsys.readouterr().err
        code = cli.main(["canvas", str(FALCON), "--out", str(tmp_path / "missing" / "c.mmd"), "-q"])
        assert code == 2 and "does not exist" in capsys.readouterr().err


def test_ask_has_the_same_question_limit_and_refuses_a_negative_chunk_cap(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with use_chat_model(fake_chat_model()):
        code = cli.main(["ask", str(FALCON), LONG, "-q", "--embedder", "hash"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert f"the question is {len(LONG)} characters long; the limit is {MAX_QUESTION_CHARS}" in err
        question = "Who manages procurement?"
        code = cli.main(["ask", str(FALCON), question, "--max-chunks", "-5", "-q", "--embedder", "hash"])
        err = capsys.readouterr().err
        assert code == 2 and "max_chunks" in err and "must not be negative" in err and err.count("\n") == 1, err


# --- which document: one rule in every workflow ------------------------------------------------
CHAIN_ANSWER = '{"answer": "40,000 euros", "evidence": ["c0"], "explanation": "Approved [c0]."}'
CHAIN_NOTE = quoting([("euros", "nothing")])
WORKFLOWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "chain": ({"question": "What budget was approved?"}, {"order": "original", "max_chunks": 1}),
    "summarize": ({"length": 200}, {}),
    "offload": ({"question": "What budget was approved?"}, {"policy": "offload"}),
}
"""Workflow -> (its own input besides the document, context)."""
COMBINATIONS = [c for n in range(len(DOCUMENT_FIELDS) + 1) for c in itertools.combinations(DOCUMENT_FIELDS, n)]
OTHER_TEXT = "# Otters\n\nOtters hold hands while they sleep so that they do not drift apart."


def every_role_model() -> ScriptedChatModel:
    """One scripted model for the three workflows (chain workers and manager, summarize, offload)."""
    return ScriptedChatModel(
        rules=[("manager of a chain", CHAIN_ANSWER), ("Evidence so far:", CHAIN_NOTE)],
        default=lambda messages: (
            offload_reply(messages) if "conclusion" in str(messages[0].content).lower() else summarize_reply(messages)
        ),
    )


@pytest.fixture
def named(sample_markdown: Path, tmp_path: Path) -> dict[str, str]:
    """A value for each document field: an ingested doc_id, and a path and a text not ingested yet."""
    other = tmp_path / "other.md"
    other.write_text("# Herons\n\nHerons wait very still in shallow water for fish.\n", encoding="utf-8")
    return {"doc_id": ingest_file(str(sample_markdown)).doc_id, "path": str(other), "text": OTHER_TEXT}


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
@pytest.mark.parametrize("given", COMBINATIONS, ids=lambda c: "+".join(c) or "none")
def test_every_workflow_names_its_document_by_one_rule(
    workflow: str, given: tuple[str, ...], named: dict[str, str]
) -> None:
    request, context = WORKFLOWS[workflow]
    values = {field: named[field] for field in given}
    before = [d.doc_id for d in list_documents("default")]
    graph = compile_with(workflow, None)
    with use_chat_model(every_role_model()):
        if len(given) != 1:
            message = "no document: give one of doc_id, path or text"
            if given:
                message = f"give exactly one of doc_id, path or text to name the document, not {' and '.join(given)}"
            with pytest.raises(InputError) as refused:
                graph.invoke({**request, **values}, context=context)
            assert str(refused.value).splitlines()[0] == message
            assert [d.doc_id for d in list_documents("default")] == before  # nothing was ingested
            return
        out = graph.invoke({**request, **values}, context=context)
    field = given[0]
    expected = named["doc_id"] if field == "doc_id" else content_hash(read_source(**{field: named[field]}).text)
    assert out["doc_id"] == expected
    assert sorted(d.doc_id for d in list_documents("default")) == sorted({*before, expected})


@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_every_workflow_takes_its_namespace_from_the_input_and_keeps_no_text(
    workflow: str, named: dict[str, str]
) -> None:
    request, context = WORKFLOWS[workflow]
    graph = compile_with(workflow, InMemorySaver())
    config = {"configurable": {"thread_id": f"ns-{workflow}"}}
    with use_chat_model(every_role_model()):
        with pytest.raises(InputError, match="not ingested in namespace 'zoo'"):
            graph.invoke(
                {**request, "doc_id": named["doc_id"], "namespace": "zoo"},
                config={"configurable": {"thread_id": f"refused-{workflow}"}},
                context=context,
            )
        out = graph.invoke({**request, "text": OTHER_TEXT, "namespace": "zoo"}, config=config, context=context)
    assert [d.doc_id for d in list_documents("zoo")] == [out["doc_id"]]
    assert out["doc_id"] not in [d.doc_id for d in list_documents("default")]
    values = graph.get_state(config).values
    assert values["namespace"] == "zoo" and values["text"] == "" and OTHER_TEXT not in str(values)


BLOBS = {
    "letters": "x" * 120_000,
    "base64": base64.b64encode(b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2800))).decode(),
    "hex": b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(1800)).hex(),
}
"""Documents without a space: as long as a few hundred English words would be, they count by characters."""


@pytest.mark.parametrize("blob", sorted(BLOBS))
@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_a_document_without_spaces_never_makes_an_oversized_request_or_summary(workflow: str, blob: str) -> None:
    request, context = WORKFLOWS[workflow]
    model = every_role_model()
    out: dict[str, Any] = {}
    with use_chat_model(model), contextlib.suppress(ModelError):
        out = compile_with(workflow, None).invoke({**request, "text": BLOBS[blob]}, context=context)
    assert model.calls, "the model was asked (the text is not its own summary)"
    for call in model.calls:
        prompt = "\n".join(str(m.content) for m in call)
        assert count_tokens(prompt) <= 4000 and len(prompt) <= 16_000, (len(prompt), prompt[:200])
    if workflow == "summarize" and out:
        assert length_units(out["summary"], "en") <= 1.25 * request["length"]
        assert len(out["summary"]) <= 1.25 * request["length"] * LONG_RUN + 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ask", "{doc}", "   "], "the question is empty"),
        (["ask", "{doc}", "   ", "--thread-id", "door"], "the question is empty"),
        (["ask", "{doc}", LONG, "--thread-id", "door"], f"the limit is {MAX_QUESTION_CHARS}"),
        (["summarize", "{doc}", "--length", "-3"], "length must be between 10 and 2000 words, got -3"),
        (["summarize", "{doc}", "--length", "-3", "--thread-id", "door"], "length must be between 10 and 2000"),
        (["summarize", "{doc}", "--query", LONG, "--thread-id", "door"], f"the limit is {MAX_QUESTION_CHARS}"),
        (["chat", "{doc}", "--script", "{script}", "--session", "door"], f"the limit is {MAX_QUESTION_CHARS}"),
    ],
)
def test_a_refused_command_leaves_the_data_home_as_it_was(
    argv: list[str], message: str, tmp_path: Path, longdoc_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every input check runs before the document is ingested, a thread locked or a checkpoint written."""
    doc = tmp_path / "heron.md"
    doc.write_text("# Heron\n\nThe 3391-KESTREL-DUNE shelf holds the pumps.\n", encoding="utf-8")
    script = tmp_path / "questions.json"
    script.write_text(f'["{LONG}"]', encoding="utf-8")
    with use_chat_model(fake_chat_model()):
        code = cli.main([a.format(doc=doc, script=script) for a in argv] + ["-q", "--embedder", "hash"])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    held = [str(p) for p in longdoc_home.rglob("*") if p.is_file()]
    assert held == []


def test_an_html_page_past_its_bounds_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    page.write_text("<div>" * 5000 + "Otters.", encoding="utf-8")
    assert cli.main(["ingest", str(page), "-q", "--embedder", "hash"]) == 2
    assert "LONGDOC_MAX_HTML_DEPTH" in capsys.readouterr().err
    monkeypatch.setenv("LONGDOC_MAX_HTML_ELEMENTS", "10")
    page.write_text("<p>Otters hold hands.</p>" * 20, encoding="utf-8")
    assert cli.main(["ingest", str(page), "-q", "--embedder", "hash"]) == 2
    assert "LONGDOC_MAX_HTML_ELEMENTS" in capsys.readouterr().err
