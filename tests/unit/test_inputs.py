"""Bad input ends in exit code 2 / HTTP 400 with a one-line message that names the real problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import cli
from graphs.ingest import graph as ingest
from graphs.route import graph as route
from graphs.summarize import graph as summarize
from nodes.ingest import ingest as ingest_file
from stores.models import use_chat_model
from stores.settings import MAX_QUESTION_CHARS, InputError
from tests.fakes import offload_chat_model as fake_chat_model

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
        from graphs.offload import graph as chat

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
