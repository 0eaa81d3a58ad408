from __future__ import annotations

import argparse
import itertools
import json
import re
from pathlib import Path

import pytest

from stores.chat_stream import partial_field
from surfaces.cli import EXIT_INPUT, EXIT_OK, AnswerPrinter, main


def test_ingest_json_then_cached(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(sample_markdown), "--json", "-q"]) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    assert set(first) == {"doc_id", "chunks", "cached", "title", "documents", "superseded"}
    assert first["cached"] is False and first["superseded"] == []
    assert first["documents"] == [
        {**{k: first[k] for k in ("doc_id", "chunks", "cached", "title")}, "source": "sample.md"}
    ]
    assert main(["ingest", str(sample_markdown), "--json", "-q"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == {
        **first,
        "cached": True,
        "documents": [{**first["documents"][0], "cached": True}],
    }


def test_ingest_text_output_and_namespace(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stores.documents import list_documents
    from stores.vectorstore import get_store

    assert main(["ingest", str(sample_markdown), "--namespace", "team1", "-q"]) == EXIT_OK
    assert "indexed: Project Falcon" in capsys.readouterr().out
    (doc,) = list_documents("team1")
    assert doc.title == "Project Falcon" and doc.namespace == "team1" and list_documents("default") == []
    assert get_store("team1").count() == doc.chunks > 0 and get_store("default").count() == 0


def test_bad_input_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(tmp_path / "missing.md")]) == EXIT_INPUT
    assert "no such file" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path), "--namespace", "bad name"]) == EXIT_INPUT


def test_models_reports_bundled_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == EXIT_OK
    info = json.loads(capsys.readouterr().out)
    assert "bundled llama.cpp" in info["chat"]["worker"]["endpoint"]
    assert info["embedder"]["name"] == "hash"
    assert info["checkpoints"].endswith("checkpoints.sqlite")


def test_models_reports_configured_endpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://10.1.2.3:8000/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "served-model")
    monkeypatch.setenv("LONGDOC_EDITOR_MODEL", "bigger-model")
    assert main(["models"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "served-model  ->  http://10.1.2.3:8000/v1" in out
    assert "editor     bigger-model" in out


def test_help_explains_the_product(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "Chow-Liu" in out and "LONGDOC_BASE_URL" in out


def test_partial_json_string_grows_with_the_reply() -> None:
    full = json.dumps({"answer": 'Bob "Chen"\nsigned 😀 中文', "evidence": ["c1"]})
    seen = [partial_field(full[:i], "answer") for i in range(len(full) + 1)]
    assert seen[0] is None and seen[-1] == 'Bob "Chen"\nsigned 😀 中文'
    grown = [s for s in seen if s is not None]
    assert all(b.startswith(a) for a, b in itertools.pairwise(grown))
    assert partial_field('{"evidence": ["c1"]}', "answer") is None


def test_answer_printer_restarts_on_a_retry_and_ends_with_the_final_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from langchain_core.messages import AIMessageChunk

    printer = AnswerPrinter({"manager"})
    meta = {"langgraph_node": "manager"}
    for piece in ['{"ans', 'wer": "Bob', " Ch"]:
        printer.on_message(AIMessageChunk(content=piece, id="first"), meta)
    printer.on_message(AIMessageChunk(content='{"answer": "ignored"}', id="w"), {"langgraph_node": "worker"})
    for piece in ['{"answer": "Bob', ' Chen"}']:
        printer.on_message(AIMessageChunk(content=piece, id="retry"), meta)
    printer.finish("Bob Chen")
    assert capsys.readouterr().out == "Bob Ch\nBob Chen\n"
    printer = AnswerPrinter({"manager"})
    printer.on_message(AIMessageChunk(content='{"answer": "Bob', id="x"), meta)
    printer.finish("Alice")  # the graph's final answer differs from what streamed: it is printed too
    assert capsys.readouterr().out == "Bob\nAlice\n"


def test_every_workflow_command_shares_the_common_flags() -> None:
    from surfaces.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"ingest", "ask", "summarize", "chat", "canvas", "route", "models", "serve"} <= set(commands)
    for name in ("ingest", "ask", "summarize", "chat", "canvas", "route"):
        flags = {opt for action in commands[name]._actions for opt in action.option_strings}
        assert {"--json", "--namespace", "--embedder", "--quiet", "-q"} <= flags, name
    for name in ("ask", "chat"):
        flags = {opt for action in commands[name]._actions for opt in action.option_strings}
        assert {"--stream", "--no-stream"} <= flags


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    from surfaces.cli import build_parser

    (sub,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_help_lists_every_subcommand_with_its_help() -> None:
    from surfaces.cli import build_parser

    commands = _subcommands()
    assert {"ingest", "docs", "ask", "summarize", "chat", "canvas", "route", "forget", "models", "serve"} == set(
        commands
    )
    listed = build_parser().format_help().split("commands:", 1)[1]
    assert [name for name in commands if not re.search(rf"^    {name}\b", listed, flags=re.M)] == []


def test_every_commands_help_reads_as_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ["", *_subcommands()]:
        with pytest.raises(SystemExit):
            main([name, "--help"] if name else ["--help"])
        printed = capsys.readouterr().out
        assert printed.startswith("usage: longdoc") and not re.search(r"``|:[a-z]+:`", printed), (name, printed)


def test_docs_help_names_every_column_docs_prints(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(sample_markdown), "-q"]) == EXIT_OK and main(["docs"]) == EXIT_OK
    columns = capsys.readouterr().out.splitlines()[-3].split()  # the header row, above the document and the totals
    assert columns == ["id", "title", "words", "chunks", "embedder", "ingested", "source"]
    with pytest.raises(SystemExit):
        main(["docs", "--help"])
    assert f"namespace: {', '.join(columns)};" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("word", ["report.pdf", "notes.md", "0123456789abcdef", "FOLDER"])
def test_ask_with_a_document_and_no_question_is_a_usage_error(
    word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from doubles.chat import ScriptedChatModel
    from stores.models import use_chat_model

    word = str(tmp_path) if word == "FOLDER" else word
    model = ScriptedChatModel(default="never asked")
    with use_chat_model(model):
        assert main(["ask", word, "-q"]) == EXIT_INPUT
    assert f"the question is missing: longdoc ask {word} QUESTION" in capsys.readouterr().err
    assert model.calls == []


def test_ask_with_a_question_alone_asks_the_whole_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces.cli_chain import names_a_document

    assert not names_a_document("Who approved the budget?") and not names_a_document("budget")
    assert main(["ask", "Who approved the budget?", "-q"]) == EXIT_INPUT  # nothing ingested yet: said so
    assert "the question is missing" not in capsys.readouterr().err


def test_ask_offers_the_reading_knobs_of_the_chain_context() -> None:
    from nodes.chain.context import ChainContext
    from surfaces.cli import build_parser, context_values

    args = build_parser().parse_args(
        ["ask", "a.md", "q", "--floor", "-1", "--tree-weight", "1", "--jump-penalty", "0.5", "--roots", "2"]
    )
    given = {"floor": -1.0, "tree_weight": 1.0, "jump_penalty": 0.5, "roots": 2, "namespace": "default"}
    assert context_values(args, ChainContext) == given


def test_the_embedder_option_offers_every_embedder_and_refuses_others(capsys: pytest.CaptureFixture[str]) -> None:
    from nodes.context import Context, validate
    from stores.embedders import EMBEDDERS
    from stores.settings import InputError
    from surfaces.cli import build_parser
    from surfaces.options import context_field

    described = context_field(Context, "embedder").metadata
    assert described["choices"] == EMBEDDERS and all(name in described["description"] for name in EMBEDDERS)
    assert build_parser().parse_args(["ask", "a.md", "q", "--embedder", "e5torch"]).embedder == "e5torch"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ask", "a.md", "q", "--embedder", "bert"])
    assert "invalid choice: 'bert'" in capsys.readouterr().err
    with pytest.raises(InputError, match="unknown embedder 'bert'"):
        validate(Context(embedder="bert"))
