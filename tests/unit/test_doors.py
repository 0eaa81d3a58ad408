"""What the servers' doors do with requests they refuse, on the LangServe app in process: the documents a chat
message may attach, an upload that never holds other requests, and a refusal logged as one line."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from doubles.replies import offload_chat_model
from nodes.inputs import check_attachments
from nodes.offload import session
from stores.documents import list_documents
from stores.errors import InputError, TooLarge
from surfaces.doors import AnsweredErrors, answered, parse_body
from surfaces.serve import create_app

LINE = "Bob Chen manages procurement and the supplier contracts."


def _note(i: int) -> dict[str, Any]:
    return {"type": "text-plain", "text": f"{LINE} Note {i}.", "mime_type": "text/plain", "title": f"n{i}.txt"}


def _turn(*blocks: dict[str, Any]) -> dict[str, Any]:
    words = {"type": "text", "text": "Who manages procurement?"}
    return {"input": {"messages": [{"type": "human", "content": [words, *blocks]}]}}


@pytest.mark.parametrize("route", ["invoke", "stream"])
def test_a_message_attaching_too_many_documents_is_a_413_before_any_is_read(
    monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    monkeypatch.setenv("LONGDOC_MAX_ATTACHMENTS", "3")
    with TestClient(create_app(chat_model=offload_chat_model())) as client:
        refused = client.post(f"/offload/{route}", json=_turn(*(_note(i) for i in range(4))))
        assert refused.status_code == 413, refused.text
        assert "at most 3 documents (LONGDOC_MAX_ATTACHMENTS); this one attaches 4" in refused.json()["detail"]
        assert list_documents("default") == []
        taken = client.post("/offload/invoke", json=_turn(*(_note(i) for i in range(3))))
    assert taken.status_code == 200, taken.text
    assert len(list_documents("default")) == 3


def test_a_message_whose_documents_hold_too_many_bytes_together_is_a_413(monkeypatch: pytest.MonkeyPatch) -> None:
    one = len(_note(0)["text"])
    monkeypatch.setenv("LONGDOC_MAX_ATTACHMENT_BYTES", str(2 * one + 1))
    with TestClient(create_app(chat_model=offload_chat_model())) as client:
        refused = client.post("/offload/invoke", json=_turn(_note(0), _note(1), _note(2)))
        assert refused.status_code == 413 and "LONGDOC_MAX_ATTACHMENT_BYTES" in refused.json()["detail"]
        assert list_documents("default") == []
        assert client.post("/offload/invoke", json=_turn(_note(0), _note(1))).status_code == 200


def test_the_attachment_bounds_count_each_message_and_every_form_of_a_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LONGDOC_MAX_ATTACHMENTS", "2")
    file = {"type": "file", "base64": "aGVyb25z", "mime_type": "text/plain"}
    image = {"type": "image", "base64": "aGVyb25z", "mime_type": "image/png"}
    two = {"type": "human", "content": [file, image]}
    check_attachments([two, two])  # two messages of two each: each within the bound
    with pytest.raises(TooLarge, match="this one attaches 3"):
        check_attachments([{"type": "human", "content": [file, image, _note(0)]}])
    monkeypatch.setenv("LONGDOC_MAX_ATTACHMENT_BYTES", "15")
    with pytest.raises(TooLarge, match="this one attaches 16"):
        check_attachments([two])  # 8 base64 characters each, counted as sent


def test_an_upload_being_ingested_holds_no_other_request(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()
    released: list[bool] = []
    ingest = session.ingest_attachment

    def held(given: Any, ctx: Any, writer: Any = None) -> Any:
        started.set()
        released.append(release.wait(timeout=60))  # set once another request was answered meanwhile
        return ingest(given, ctx, writer)

    monkeypatch.setattr(session, "ingest_attachment", held)
    with TestClient(create_app(chat_model=offload_chat_model())) as client, ThreadPoolExecutor(1) as pool:
        upload = pool.submit(client.post, "/offload/invoke", json=_turn(_note(0)))
        assert started.wait(timeout=60)
        other = client.get("/health")
        release.set()
        assert other.status_code == 200
        assert upload.result().status_code == 200
    assert released == [True]


def test_a_refused_stream_is_logged_as_one_line_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    body = {"input": {"question": "Who manages procurement?", "doc_id": "0123456789abcdef"}}
    with TestClient(create_app(chat_model=offload_chat_model())) as client, caplog.at_level(logging.INFO):
        caplog.clear()
        streamed = client.post("/chain/stream", json=body)
    assert "event: error" in streamed.text and '"status_code": 400' in streamed.text
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
    assert "answered 400: document '0123456789abcdef' is not ingested" in lines[0].getMessage()
    assert "Traceback" not in caplog.text


def _record(event: dict[str, Any] | str, exc_info: Any = None) -> logging.LogRecord:
    return logging.LogRecord("langgraph_api.worker", logging.ERROR, __file__, 1, event, None, exc_info)


def test_an_answered_error_is_logged_without_its_traceback_any_other_with_it() -> None:
    refused = "Traceback (most recent call last):\n  File ...\nstores.errors.InputError: the question is empty\n"
    during = refused + "During task with name 'orderer' and id 'f64e'\n"
    failed = {"event": "Background run failed. Exception: InputError(the question is empty)", "exception": during}
    record = _record(dict(failed, level="error"))
    assert AnsweredErrors().filter(record)
    assert record.msg == {"event": failed["event"], "level": "warning"} and record.levelno == logging.WARNING
    said_twice = _record({"event": "Run encountered an error in graph: InputError(...)", "exception": refused})
    assert not AnsweredErrors().filter(said_twice)  # the run's failure is the one line
    crashed = {"event": "Background run failed", "exception": refused.replace("stores.errors.InputError", "KeyError")}
    kept = _record(crashed)
    assert AnsweredErrors().filter(kept) and kept.msg == crashed and kept.levelno == logging.ERROR
    try:
        raise TooLarge("too big")
    except InputError as exc:
        plain = _record("refused", (type(exc), exc, exc.__traceback__))
    assert (
        AnsweredErrors().filter(plain) and plain.exc_info is None and plain.getMessage() == "refused: TooLarge: too big"
    )
    # Aegra says a failed run's error again on other lines: those go, a line of another error stays.
    assert not AnsweredErrors().filter(_record({"event": "[wait_for_run] run failed run_id=r1 error=too big"}))
    assert not AnsweredErrors().filter(_record("[execute_run_async] streaming error for run_id=r1: too big"))
    assert AnsweredErrors().filter(_record("[execute_run_async] streaming error for run_id=r1: disk full"))
    assert answered(RuntimeError("boom")) is False and answered(None, "no traceback") is False


@pytest.mark.parametrize(("raw", "reason"), [(b'{"a": }', "Expecting value"), (b'{"a": 01}', "Expecting ','")])
def test_a_body_that_is_not_json_is_refused_with_the_parsers_reason(raw: bytes, reason: str) -> None:
    from surfaces.access import Refused

    with pytest.raises(Refused, match=reason) as refused:
        parse_body(raw)
    assert refused.value.status == 400 and "at offset" in str(refused.value)
    assert parse_body(b"") == {}
