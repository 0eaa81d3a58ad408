"""The LangServe app over HTTP as a hostile caller holding a valid key would use it.

Covers: no server file read through ``path`` (unless inside an operator-set ingest root, symlinks
included, with messages that reveal nothing outside it), no caller-chosen model endpoint or model
settings (and no request leaving for a caller-given URL), tenants fixed by their key (namespace
in config and input, thread ids), and request bodies cut at the size limit while they stream.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.language_models import BaseChatModel

from doubles import endpoint as fake_endpoint
from doubles.replies import offload_chat_model as fake_chat_model
from surfaces import registry
from surfaces.access import SERVED_FIELDS, key_digest
from surfaces.serve import create_app

SECRET = "The launch code of Project Heron is 7-ALPHA-9."
FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def _client(chat_model: BaseChatModel | None = None) -> TestClient:
    return TestClient(create_app(chat_model=chat_model))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A private file the server process can read, outside any ingest root."""
    private = tmp_path / "private" / "notes.txt"
    private.parent.mkdir()
    private.write_text(SECRET + "\n\nMore private text follows here.\n", encoding="utf-8")
    return private


# --- 1. no server file read ------------------------------------------------------------------------
FILE_REQUESTS = [
    ("/ingest/invoke", lambda p: {"path": p}),
    ("/summarize/invoke", lambda p: {"path": p}),
    ("/offload/invoke", lambda p: {"question": "What is the launch code?", "path": p}),
    ("/route/invoke", lambda p: {"request": "plot sales", "registry": "r", "registry_path": p}),
]


@pytest.mark.parametrize(("route", "make"), FILE_REQUESTS)
def test_paths_are_refused_without_an_ingest_root(route: str, make, outside: Path) -> None:  # type: ignore[no-untyped-def]
    with _client(fake_chat_model()) as client:
        for given in (str(outside), "../../" + outside.name, "/etc/passwd", "missing.txt"):
            response = client.post(route, json={"input": make(given)})
            assert response.status_code == 400, response.text
            detail = response.json()["detail"]
            assert "send the document as `text`" in detail and SECRET not in response.text
        stream = client.post(route.replace("invoke", "stream"), json={"input": make(str(outside))})
        assert stream.status_code == 400 and SECRET not in stream.text
        batch = client.post(route.replace("invoke", "batch"), json={"inputs": [make(str(outside))]})
        assert batch.status_code == 400 and SECRET not in batch.text


def test_ingest_root_confines_paths_symlinks_included(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.md").write_text("# Otters\n\nOtters hold hands while sleeping.\n", encoding="utf-8")
    (root / "sub" / "inside-link.md").symlink_to(root / "sub" / "ok.md")
    (root / "escape.txt").symlink_to(outside)
    (root / "escape-dir").symlink_to(outside.parent, target_is_directory=True)
    (root / "data.bin").write_bytes(b"\x00\x01")
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    with _client() as client:
        ok = client.post("/ingest/invoke", json={"input": {"path": "sub/ok.md"}})
        assert ok.status_code == 200, ok.text
        assert ok.json()["output"]["title"] == "Otters"
        linked = client.post("/ingest/invoke", json={"input": {"path": "sub/inside-link.md"}})
        assert linked.status_code == 200 and linked.json()["output"]["doc_id"] == ok.json()["output"]["doc_id"]
        refused = {
            given: client.post("/ingest/invoke", json={"input": {"path": given}})
            for given in (
                "escape.txt",
                "escape-dir/notes.txt",
                "../private/notes.txt",
                str(outside),
                "sub/../../private/notes.txt",
                "missing.txt",
                "nul\x00byte.txt",
            )
        }
        for given, response in refused.items():
            assert response.status_code == 400, (given, response.text)
            # One message for every case: nothing tells what exists outside the root.
            detail = response.json()["detail"]
            assert detail == f"no readable file {given!r} under the ingest root"
            assert SECRET not in detail and str(tmp_path) not in detail.replace(repr(given), "")
        # A folder under the root is ingested whole, links out of it left out; its files are named relative to it.
        folder = client.post("/ingest/invoke", json={"input": {"path": "sub"}})
        assert folder.status_code == 200, folder.text
        out = folder.json()["output"]
        assert [d["source"] for d in out["documents"]] == ["inside-link.md", "ok.md"]
        assert {d["doc_id"] for d in out["documents"]} == {ok.json()["output"]["doc_id"]} and out["failed"] == []
        whole = client.post("/ingest/invoke", json={"input": {"path": "."}})
        assert whole.status_code == 200, whole.text
        assert [d["source"] for d in whole.json()["output"]["documents"]] == ["sub/inside-link.md", "sub/ok.md"]
        assert SECRET not in whole.text and str(tmp_path) not in whole.text
        for given in ("escape-dir", "../private", str(outside.parent)):
            response = client.post("/ingest/invoke", json={"input": {"path": given}})
            assert response.status_code == 400 and SECRET not in response.text, (given, response.text)
        odd = client.post("/ingest/invoke", json={"input": {"path": "data.bin"}})
        assert odd.status_code == 400 and str(tmp_path) not in odd.text and "data.bin" in odd.json()["detail"]


def test_documents_arrive_as_text_or_uploaded_bytes() -> None:
    import base64
    import io

    import docx

    buffer = io.BytesIO()
    document = docx.Document()
    document.add_heading("Heron report", level=1)
    document.add_paragraph(SECRET)
    document.save(buffer)
    upload = {"data": base64.b64encode(buffer.getvalue()).decode(), "filename": "report.docx"}
    with _client() as client:
        ok = client.post("/ingest/invoke", json={"input": upload})
        assert ok.status_code == 200, ok.text
        assert ok.json()["output"]["title"] == "Heron report" and ok.json()["output"]["chunks"] == 1
        for bad, message in (
            ({**upload, "data": "not base64!"}, "not valid base64"),
            ({"data": upload["data"]}, "needs a filename"),
            ({**upload, "filename": "report.exe"}, "unsupported type .exe"),
            ({**upload, "text": "also text"}, "not several"),
            ({**upload, "path": "x.md"}, "send the document as `text`"),
        ):
            response = client.post("/ingest/invoke", json={"input": bad})
            assert response.status_code == 400 and message in response.json()["detail"], response.text


# --- 2. model settings are the operator's ------------------------------------------------------------
FORBIDDEN_KEYS = ["base_url", "model", "api_key", "temperature", "embedder", "llm_cache", "worker_model"]


@pytest.mark.parametrize("workflow", sorted(SERVED_FIELDS))
def test_served_config_schema_is_the_allow_list(workflow: str) -> None:
    with _client() as client:
        schema = client.get(f"/{workflow}/config_schema").json()
    configurable = next(v for k, v in schema["$defs"].items() if k.endswith("Served"))
    served = set(configurable["properties"])
    context = importlib.import_module(registry.WORKFLOWS[workflow]).builder.context_schema
    assert served == (SERVED_FIELDS[workflow] & {f.name for f in fields(context)}) | {"thread_id"}
    assert not served & {"base_url", "model", "api_key", "temperature", "embedder", "llm_cache"}
    assert not any(name.endswith("_model") or "embedder" in name for name in served)


@pytest.mark.parametrize("key", FORBIDDEN_KEYS)
def test_model_settings_in_config_are_refused(key: str) -> None:
    with _client() as client:
        body = {"input": {"text": "Otters hold hands."}, "config": {"configurable": {key: "http://evil.test/v1"}}}
        response = client.post("/ingest/invoke", json=body)
        assert response.status_code == 400 and key in response.json()["detail"]
        batch = {"inputs": [{"text": "Otters."}], "config": [{"configurable": {key: "x"}}]}
        assert client.post("/ingest/batch", json=batch).status_code == 400
        assert client.post("/ingest/stream", json=body).status_code == 400


@pytest.mark.enable_socket
def test_no_request_leaves_for_a_caller_given_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from langserve.lzstring import LZString

    operator, attacker = fake_endpoint.Script(), fake_endpoint.Script()
    with (
        fake_endpoint.running(fake_endpoint.create_app(operator)) as operator_url,
        fake_endpoint.running(fake_endpoint.create_app(attacker)) as attacker_url,
    ):
        monkeypatch.setenv("LONGDOC_BASE_URL", operator_url + "/v1")
        monkeypatch.setenv("LONGDOC_MODEL", "operator-model")
        monkeypatch.setenv("LONGDOC_API_KEY", "upstream-secret")
        evil = {"base_url": attacker_url + "/v1", "model": "evil", "offloader_model": "evil", "embedder": "openai"}
        with _client() as client:
            doc = client.post("/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
            doc_id = doc.json()["output"]["doc_id"]
            question = {"question": "Who manages procurement?", "doc_id": doc_id}
            refused = client.post("/offload/invoke", json={"input": question, "config": {"configurable": evil}})
            assert refused.status_code == 400
            # The config-in-URL form cannot carry them either: they are dropped, the operator's apply.
            packed = LZString.compressToEncodedURIComponent(json.dumps({"configurable": evil}))
            answered = client.post(f"/offload/c/{packed}/invoke", json={"input": question})
            assert answered.status_code == 200, answered.text
    assert attacker.requests == []
    assert operator.requests and all(r["body"]["model"] == "operator-model" for r in operator.requests)
    assert all(r["headers"]["authorization"] == "Bearer upstream-secret" for r in operator.requests)


# --- 3. tenants -------------------------------------------------------------------------------------------
ALICE, BOB = {"X-API-Key": "alice-key"}, {"Authorization": "Bearer bob-key"}


@pytest.fixture
def tenants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "alice": f"sha256:{key_digest('alice-key')}",
                "bob": {"key_sha256": key_digest("bob-key"), "namespaces": ["bob", "bob-archive"]},
            }
        ),
        encoding="utf-8",
    )
    os.chmod(keys, 0o600)
    monkeypatch.setenv("LONGDOC_SERVER_KEYS", str(keys))
    with _client(fake_chat_model()) as client:
        yield client


def _ingest(client: TestClient, headers: dict[str, str], body: dict, config: dict | None = None):  # type: ignore[no-untyped-def]
    payload: dict = {"input": body}
    if config is not None:
        payload["config"] = {"configurable": config}
    return client.post("/ingest/invoke", json=payload, headers=headers)


def test_a_key_fixes_the_namespace_in_config_and_input(tenants: TestClient) -> None:
    client = tenants
    assert _ingest(client, {"X-API-Key": "carol-key"}, {"text": SECRET}).status_code == 401
    mine = _ingest(client, ALICE, {"text": SECRET})
    assert mine.status_code == 200, mine.text
    doc_id = mine.json()["output"]["doc_id"]
    for config, body in (({"namespace": "alice"}, {"text": "x"}), (None, {"text": "x", "namespace": "alice"})):
        response = _ingest(client, BOB, body, config)
        assert response.status_code == 403, response.text
        assert SECRET not in response.text
    assert _ingest(client, BOB, {"text": "Bob's archive note."}, {"namespace": "bob-archive"}).status_code == 200
    for route, body in (
        ("/summarize/invoke", {"doc_id": doc_id}),
        ("/offload/invoke", {"question": "What is the launch code?", "doc_id": doc_id}),
    ):
        stolen = client.post(route, json={"input": body}, headers=BOB)
        assert stolen.status_code == 400 and "not ingested" in stolen.json()["detail"]
        assert SECRET not in stolen.text
        foreign = client.post(
            route, json={"input": body, "config": {"configurable": {"namespace": "alice"}}}, headers=BOB
        )
        assert foreign.status_code == 403
    own = client.post("/summarize/invoke", json={"input": {"doc_id": doc_id}}, headers=ALICE)
    assert own.status_code == 200, own.text
    batch = client.post("/ingest/batch", json={"inputs": [{"text": "a", "namespace": "alice"}]}, headers=BOB)
    assert batch.status_code == 403


def test_a_thread_id_names_the_tenants_own_thread_and_reveals_nothing(tenants: TestClient) -> None:
    client = tenants
    text = FALCON.read_text(encoding="utf-8")
    alice_doc = _ingest(client, ALICE, {"text": text}).json()["output"]["doc_id"]
    bob_doc = _ingest(client, BOB, {"text": text}).json()["output"]["doc_id"]

    def turn(headers: dict[str, str], doc_id: str, thread: str, namespace: str = ""):  # type: ignore[no-untyped-def]
        configurable = {"thread_id": thread, **({"namespace": namespace} if namespace else {})}
        body = {
            "input": {"question": "Who manages procurement?", "doc_id": doc_id},
            "config": {"configurable": configurable},
        }
        return client.post("/offload/invoke", json=body, headers=headers)

    assert turn(ALICE, alice_doc, "alice-session").json()["output"]["turn"] == 1
    # Bob naming Alice's thread gets a thread of his own, answered exactly as an id nobody used:
    # nothing tells him the id is taken, and Alice's thread is untouched.
    taken, unused = turn(BOB, bob_doc, "alice-session"), turn(BOB, bob_doc, "never-used")
    assert taken.status_code == unused.status_code == 200, taken.text
    for key in ("turn", "answer", "citations", "recalled"):
        assert taken.json()["output"][key] == unused.json()["output"][key]
    assert taken.json()["output"]["turn"] == 1
    stream = client.post(
        "/offload/stream",
        json={
            "input": {"question": "q", "doc_id": bob_doc},
            "config": {"configurable": {"thread_id": "alice-session-2"}},
        },
        headers=BOB,
    )
    assert stream.status_code == 200 and '"namespace":"alice"' not in stream.text
    batch = client.post(
        "/offload/batch",
        json={
            "inputs": [{"question": "q", "doc_id": bob_doc}] * 2,
            "config": {"configurable": {"thread_id": "alice-session"}},
        },
        headers=BOB,
    )
    assert batch.status_code == 200, batch.text
    assert turn(ALICE, alice_doc, "alice-session").json()["output"]["turn"] == 2
    assert turn(BOB, bob_doc, "alice-session").json()["output"]["turn"] == 2
    assert turn(BOB, bob_doc, "bob-session").json()["output"]["turn"] == 1
    moved = turn(BOB, bob_doc, "bob-session", namespace="bob-archive")
    assert moved.status_code == 403
    assert turn(ALICE, alice_doc, "bob-session").json()["output"]["turn"] == 1


def test_a_chat_session_is_the_callers_own_thread_never_a_value_it_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tenants sharing a namespace: one cannot write or read the other's offloaded turns by naming its session."""
    from stores.offload import get_offload_store
    from surfaces.access import thread_key

    shared = {"namespaces": ["shared"]}
    monkeypatch.setenv(
        "LONGDOC_SERVER_KEYS", json.dumps({"b": {"key": "b-key", **shared}, "c": {"key": "c-key", **shared}})
    )
    b, c = {"X-API-Key": "b-key"}, {"X-API-Key": "c-key"}
    with _client(fake_chat_model()) as client:
        doc_id = _ingest(client, b, {"text": FALCON.read_text(encoding="utf-8")}).json()["output"]["doc_id"]

        def turn(headers: dict[str, str], thread: str, question: str, **extra: str):  # type: ignore[no-untyped-def]
            body = {
                "input": {"question": question, "doc_id": doc_id, **extra},
                "config": {"configurable": {"thread_id": thread}},
            }
            return client.post("/offload/invoke", json=body, headers=headers)

        first = turn(b, "bchat", "Who manages procurement?")
        assert first.status_code == 200, first.text
        victim = first.json()["output"]["session"]
        assert victim == thread_key("b", "bchat")
        stored = get_offload_store("shared").get(victim, ["o1"])[0].text
        for route in ("invoke", "stream", "batch"):
            body: dict = {"question": "What is the launch code?", "doc_id": doc_id, "session": victim}
            payload = {"inputs": [body]} if route == "batch" else {"input": body}
            refused = client.post(
                f"/offload/{route}", json={**payload, "config": {"configurable": {"thread_id": "c1"}}}, headers=c
            )
            assert refused.status_code == 400 and "session" in refused.json()["detail"], refused.text
        # C's own turn on a thread of the same name is its own session: B's stored turn is untouched.
        own = turn(c, "bchat", "What is the launch code?")
        assert own.status_code == 200 and own.json()["output"]["session"] == thread_key("c", "bchat")
        assert get_offload_store("shared").get(victim, ["o1"])[0].text == stored
        assert get_offload_store("shared").get(own.json()["output"]["session"], ["o1"])[0].text != stored


def test_single_server_key_is_one_tenant_with_every_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_SERVER_API_KEY", "s3cret")
    with _client() as client:
        key = {"X-API-Key": "s3cret"}
        assert _ingest(client, key, {"text": "Team text."}, {"namespace": "team1"}).status_code == 200
        assert _ingest(client, key, {"text": "Team text.", "namespace": "team2"}).status_code == 200
        assert _ingest(client, {"X-API-Key": "s3cre"}, {"text": "x"}).status_code == 401


def test_malformed_keys_stop_the_server_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in (
        '{"a": ""}',
        '{"a": "sha256:xyz"}',
        "[1]",
        '{"a": "k", "b": "k"}',
        '{"a": {"key": "k", "namespaces": ["../x"]}}',
    ):
        monkeypatch.setenv("LONGDOC_SERVER_KEYS", bad)
        with pytest.raises(ValueError, match="LONGDOC_SERVER_KEYS"):
            create_app()


# --- request size ----------------------------------------------------------------------------------
def test_chunked_body_is_cut_at_the_limit_while_it_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_REQUEST_BYTES", "10000")
    app = create_app()
    pulled: list[int] = []
    sent: list[dict] = []

    async def receive() -> dict:
        # A 1 MB chunked body (no Content-Length), 1 kB per message, as a client streams it.
        pulled.append(1)
        return {"type": "http.request", "body": b"x" * 1000, "more_body": len(pulled) < 1000}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ingest/invoke",
        "raw_path": b"/ingest/invoke",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert len(pulled) == 11  # stopped reading right after the limit, not after 1 MB


# --- what one request may ask of the server ---------------------------------------------------------------
def test_a_body_that_is_not_json_is_refused_with_415() -> None:
    body = json.dumps({"input": {"text": "Otters hold hands."}}).encode()
    with _client() as client:
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""):
            response = client.post("/ingest/invoke", content=body, headers={"content-type": content_type})
            assert response.status_code == 415 and "JSON" in response.json()["detail"], content_type
        ok = client.post("/ingest/invoke", content=body, headers={"content-type": "application/json; charset=utf-8"})
        assert ok.status_code == 200, ok.text


def test_deep_json_and_non_finite_numbers_are_400_not_500() -> None:
    from langserve.lzstring import LZString

    deep = b'{"input": {"text": "x", "title": ' + b"[" * 1000 + b"]" * 1000 + b"}}"
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        response = client.post("/ingest/invoke", content=deep, headers={"content-type": "application/json"})
        assert response.status_code == 400 and "LONGDOC_MAX_JSON_DEPTH" in response.json()["detail"]
        for number in (b"NaN", b"Infinity", b"-Infinity"):
            body = b'{"input": {"text": "Otters."}, "config": {"configurable": {"chunk_size": ' + number + b"}}}"
            response = client.post("/ingest/invoke", content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400 and "not a JSON value" in response.json()["detail"]
        # The config-in-URL form is parsed by LangServe itself: its NaN is refused there.
        packed = LZString.compressToEncodedURIComponent('{"configurable": {"chunk_size": NaN}}')
        response = client.post(f"/ingest/c/{packed}/invoke", json={"input": {"text": "Otters hold hands."}})
        assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "chunk_size"
        packed = LZString.compressToEncodedURIComponent('{"configurable": {"jump_penalty": Infinity}}')
        response = client.post(f"/chain/c/{packed}/invoke", json={"input": {"question": "Who?", "doc_id": "0" * 16}})
        assert response.status_code == 400 and "finite" in response.json()["detail"], response.text
        quoted = {"input": {"text": "A note on NaN [[[ and Infinity."}}
        assert client.post("/ingest/invoke", json=quoted).status_code == 200


MALFORMED = {
    "lone surrogate": b'"Otters \\ud800 hold hands."',
    "lone low surrogate": b'"\\udc00 Otters."',
    "invalid UTF-8": b'"Otters \xff\xfe hold hands."',
    "5,000-digit integer": b"9" * 5000,
    "overflowing number": b"1e999",
}
"""JSON values the standard parser takes (or half takes) that used to end in a 500 with the exception's text."""


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_text_a_parser_chokes_on_is_a_short_400(case: str) -> None:
    value = MALFORMED[case]
    bodies = {
        "/ingest/invoke": b'{"input": {"text": %s}}' % value,
        "/ingest/stream": b'{"input": {"text": "Otters.", "title": %s}}' % value,
        "/ingest/batch": b'{"inputs": [{"text": "Otters."}], "config": {"configurable": {"chunk_size": %s}}}' % value,
        "/offload/invoke": b'{"input": {"question": %s, "doc_id": "0123456789abcdef"}}' % value,
    }
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        for route, body in bodies.items():
            response = client.post(route, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400, (route, response.text)
            detail = response.json()["detail"]
            assert "\n" not in detail and len(detail) < 200 and "Error" not in detail, detail
        good = {"input": {"text": "Otters \U0001f9a6 hold hands, caf\u00e9."}}  # a surrogate pair is text
        headers = {"content-type": "application/json"}
        assert client.post("/ingest/invoke", content=json.dumps(good), headers=headers).status_code == 200


@pytest.mark.enable_socket
def test_a_failing_stream_ends_with_an_error_event_and_a_whole_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model fails half-way through a streamed run: the client reads every byte, the last event says why."""
    import httpx

    from stores.endpoints import endpoint_gate

    for name, value in {"LONGDOC_READ_TIMEOUT": "0.5", "LONGDOC_MAX_RETRIES": "0", "LONGDOC_MODEL": "scripted"}.items():
        monkeypatch.setenv(name, value)
    endpoint_gate.reset()
    script = fake_endpoint.Script(fault="error_500")
    with fake_endpoint.running(fake_endpoint.create_app(script)) as model, fake_endpoint.running(create_app()) as url:
        monkeypatch.setenv("LONGDOC_BASE_URL", model + "/v1")
        doc = httpx.post(f"{url}/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
        doc_id = doc.json()["output"]["doc_id"]
        for route, body in (
            ("/offload/stream", {"question": "Who manages procurement?", "doc_id": doc_id}),
            ("/chain/stream", {"question": "Who manages procurement?", "doc_id": doc_id}),
            ("/summarize/stream_events", {"doc_id": doc_id, "length": 40}),
        ):
            endpoint_gate.reset()
            with httpx.stream("POST", url + route, json={"input": body}, timeout=60) as response:
                text = "".join(response.iter_text())  # an incomplete body would raise here
            events = [block for block in text.split("\r\n\r\n") if block.strip()]
            assert len(events) > 2 and "event: data" in events[1], (route, text[:300])
            assert events[-1].startswith("event: error"), (route, events[-1])
            error = json.loads(events[-1].split("data: ", 1)[1])
            assert error["status_code"] == 503 and model in error["message"], error


def test_a_batch_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    with _client() as client:
        response = client.post("/ingest/batch", json={"inputs": [{"text": "Otters."}] * 2000})
        assert response.status_code == 413 and "LONGDOC_MAX_BATCH" in response.json()["detail"]
        monkeypatch.setenv("LONGDOC_MAX_BATCH", "2")
        assert client.post("/ingest/batch", json={"inputs": [{"text": "Otters."}] * 3}).status_code == 413
        assert client.post("/ingest/batch", json={"inputs": [{"text": "Otters."}] * 2}).status_code == 200


def test_uploads_are_bounded_and_clearly_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    def upload(data: bytes, filename: str, **extra: str) -> dict:
        return {"input": {"data": base64.b64encode(data).decode(), "filename": filename, **extra}}

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        for encoding in ("klingon", "rot13", "undefined", "utf\x00"):
            response = client.post("/ingest/invoke", json=upload(b"caf\xe9.", "a.txt", encoding=encoding))
            assert response.status_code == 400 and "encoding" in response.json()["detail"], response.text
        stray = client.post("/ingest/invoke", json=upload(b"The pump costs 10\xff euros.", "prices.txt"))
        assert stray.status_code == 400 and "invalid UTF-8 at byte 17" in stray.json()["detail"]
        for text in ("\u200b\u200d\ufeff" * 100, "# Title\n\n## Part\n"):
            response = client.post("/ingest/invoke", json={"input": {"text": text}})
            assert response.status_code == 400 and "empty" in response.json()["detail"]
        monkeypatch.setenv("LONGDOC_MAX_TEXT_CHARS", "500")
        response = client.post("/ingest/invoke", json={"input": {"text": "Otters hold hands. " * 100}})
        assert response.status_code == 413 and "LONGDOC_MAX_TEXT_CHARS" in response.json()["detail"]
        monkeypatch.setenv("LONGDOC_MAX_TEXT_CHARS", "5000000")
        monkeypatch.setenv("LONGDOC_MAX_CHUNKS", "2")
        body = {"input": {"text": "Otters hold hands while they sleep. " * 400}}
        response = client.post("/ingest/invoke", json=body)
        assert response.status_code == 413 and "LONGDOC_MAX_CHUNKS" in response.json()["detail"]


# --- settings: checked first, every one bounded -----------------------------------------------------------
def test_a_refused_setting_leaves_no_document_and_no_checkpoint(longdoc_home: Path) -> None:
    """``max_chunks: -5`` is a 400 before the text is ingested or the question reaches a checkpoint (or its WAL)."""
    from stores.documents import list_documents

    text = "# Heron\n\nThe 3391-KESTREL-DUNE shelf holds the pumps.\n"
    question = "Where is the 6674-PLOVER-MARSH kept?"
    with TestClient(create_app(fake_chat_model())) as client:
        for route, payload in (
            ("/chain/invoke", {"input": {"question": question, "text": text}}),
            ("/chain/stream", {"input": {"question": question, "text": text}}),
            ("/chain/batch", {"inputs": [{"question": question, "text": text}]}),
            ("/offload/invoke", {"input": {"question": question, "text": text}, "settings": {"token_budget": 50}}),
        ):
            settings = payload.pop("settings", {"max_chunks": -5})
            config = {"configurable": {"thread_id": "refused", **settings}}
            response = client.post(route, json={**payload, "config": config})
            assert response.status_code == 400, (route, response.text)
        assert list_documents("default") == []
    for needle in ("3391-KESTREL", "6674-PLOVER"):
        held = [str(p) for p in longdoc_home.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]
        assert held == [], (needle, held)


BOUNDED = {
    "ingest": {"chunk_size": 2**70, "chunk_overlap": 10**6},
    "chain": {"worker_max_tokens": 10**9, "manager_max_tokens": 10**9, "budget": 10**9, "roots": 10**4},
    "summarize": {"expert_max_tokens": 10**9, "map_max_tokens": 10**9, "expert_k": 10**5, "direct_tokens": 10**9},
    "offload": {"answer_max_tokens": 10**9, "offloader_max_tokens": 10**9, "canvas_max_tokens": 10**9},
    "route": {"k": 10**6, "top_tools": 10**6, "candidates_factor": 10**6},
}


@pytest.mark.parametrize("workflow", sorted(BOUNDED))
def test_every_caller_knob_is_bounded(workflow: str) -> None:
    import typing

    from surfaces.access import CALLER_BOUNDS, served_fields
    from surfaces.registry import context_schema

    schema = context_schema(workflow)
    hints = typing.get_type_hints(schema)
    for f in fields(schema):
        numeric = hints[f.name] in (int, float, int | None, float | None)
        if f.name in served_fields(workflow) and numeric:
            bounded = f.name in CALLER_BOUNDS or {"min", "max"} <= set(f.metadata)
            assert bounded, f"{workflow}.{f.name} has no upper bound for callers"
    with TestClient(create_app(fake_chat_model())) as client:
        for key, huge in BOUNDED[workflow].items():
            config = {"configurable": {key: huge}}
            response = client.post(f"/{workflow}/invoke", json={"input": {"text": "x"}, "config": config})
            assert response.status_code == 400 and key in response.json()["detail"], (key, response.text)


def test_inputs_and_thread_ids_are_bounded() -> None:
    with TestClient(create_app(fake_chat_model())) as client:
        many = {"input": {"requests": ["plot sales"] * 60_000, "registry": "longdoc"}}
        response = client.post("/route/invoke", json=many)
        assert response.status_code == 400 and "at most 100 requests" in response.json()["detail"]
        long_thread = {"input": {"text": "Otters."}, "config": {"configurable": {"thread_id": "t" * 100_000}}}
        response = client.post("/ingest/invoke", json=long_thread)
        assert response.status_code == 400 and "thread_id" in response.json()["detail"]
        odd = {"input": {"text": "Otters."}, "config": {"configurable": {"thread_id": "has space/and slash"}}}
        assert client.post("/ingest/invoke", json=odd).status_code == 400
        title = {"input": {"text": "Otters.", "title": "t" * 10_000}}
        assert client.post("/ingest/invoke", json=title).status_code == 400
        chat = {"input": {"messages": [{"type": "human", "content": "hi"}] * 1000, "doc_id": "0123456789abcdef"}}
        assert client.post("/offload/invoke", json=chat).status_code == 400


def test_a_run_refused_after_its_first_checkpoint_leaves_no_copy_in_the_write_ahead_log(longdoc_home: Path) -> None:
    """The run writes its input checkpoint, then refuses (an unknown document): the thread is deleted and the
    SQLite log emptied, so the question is in no live file, read without checkpointing it first."""
    question = "Where is the 4471-GANNET-REEF kept?"
    with TestClient(create_app(fake_chat_model())) as client:
        body = {"input": {"question": question, "doc_id": "0123456789abcdef"}}
        response = client.post("/offload/invoke", json={**body, "config": {"configurable": {"thread_id": "late"}}})
        assert response.status_code == 400 and "not ingested" in response.json()["detail"]
        held = [str(p) for p in longdoc_home.rglob("checkpoints.sqlite*") if b"4471-GANNET" in p.read_bytes()]
        assert held == []


# --- the door: HTML bounds, checks before storing, sizes, stateless runs, malformed bodies --------------------
def _home_files(home: Path) -> dict[str, bytes]:
    """Every file of the data home but the lock files (taking a lock leaves its empty file) and their bytes."""
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file() and "locks" not in p.parts}


def _checkpoint_rows(home: Path) -> int:
    import sqlite3

    with sqlite3.connect(home / "checkpoints.sqlite") as db:
        return sum(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("checkpoints", "writes"))


def test_an_html_page_past_its_bounds_is_a_413_that_stores_nothing(
    longdoc_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    monkeypatch.setenv("LONGDOC_MAX_HTML_ELEMENTS", "1000")
    pages = {
        "LONGDOC_MAX_HTML_ELEMENTS": b"<p>The 3391-KESTREL shelf holds the pumps.</p>" * 2000,
        "LONGDOC_MAX_HTML_DEPTH": b"<div>" * 5000 + b"The 3391-KESTREL shelf.",
    }
    with TestClient(create_app(fake_chat_model())) as client:
        client.post("/ingest/invoke", json={"input": {"text": "Otters hold hands."}})
        before = _home_files(longdoc_home)
        for bound, page in pages.items():
            upload = {"data": base64.b64encode(page).decode(), "filename": "page.html"}
            response = client.post("/ingest/invoke", json={"input": upload})
            assert response.status_code == 413 and bound in response.json()["detail"], response.text
        assert _home_files(longdoc_home) == before


REFUSED_AT_THE_DOOR = {
    "ask with a blank question": ("chain", {"question": "   "}),
    "summarize with length -3": ("summarize", {"length": -3}),
    "summarize with a bullet-point format": ("summarize", {"format": "bullet-points"}),
    "chat with a blank question": ("offload", {"question": "   "}),
    "chat with a message that is a number": ("offload", {"messages": [5]}),
    "route with a blank request": ("route", {"request": " ", "registry_data": []}),
}
"""Inputs each workflow refuses, sent with a document's text (route takes none: its registry is stored instead)."""


@pytest.mark.parametrize("case", sorted(REFUSED_AT_THE_DOOR))
def test_every_input_check_runs_before_the_text_is_stored(case: str, longdoc_home: Path) -> None:
    """Refused on every route, on a thread or not: no document, no checkpoint, no file of the data home changed."""
    from stores.documents import list_documents

    workflow, value = REFUSED_AT_THE_DOOR[case]
    value = {**value, "text": "# Heron\n\nThe 3391-KESTREL-DUNE shelf holds the pumps.\n"}
    if workflow == "route":
        value = {**value, "registry": "heron", "registry_data": [{"name": "heron", "description": "3391-KESTREL"}]}
        value.pop("text")
    with TestClient(create_app(fake_chat_model())) as client:
        warm = client.post("/ingest/invoke", json={"input": {"text": "Otters hold hands."}}).json()["output"]["doc_id"]
        before = _home_files(longdoc_home)
        for config in ({}, {"configurable": {"thread_id": "door"}}):
            for route, body in (
                (f"/{workflow}/invoke", {"input": value}),
                (f"/{workflow}/stream", {"input": value}),
                (f"/{workflow}/batch", {"inputs": [value]}),
            ):
                response = client.post(route, json={**body, "config": config})
                assert response.status_code == 400, (route, config, response.text)
        assert [d.doc_id for d in list_documents("default")] == [warm]
        assert _home_files(longdoc_home) == before


def test_sizes_are_checked_at_the_door_before_anything_is_stored(longdoc_home: Path) -> None:
    with TestClient(create_app(fake_chat_model())) as client:
        client.post("/ingest/invoke", json={"input": {"text": "Otters hold hands."}})
        before = _home_files(longdoc_home)
        config = {"configurable": {"thread_id": "sizes"}}
        many = {"question": "Who?", "doc_ids": ["0123456789abcdef"] * 10_001}
        response = client.post("/chain/invoke", json={"input": many, "config": config})
        assert response.status_code == 400 and "at most 10000 documents" in response.json()["detail"]
        for doc_ids in (["0" * 65], "0123456789abcdef", [5]):
            response = client.post("/chain/invoke", json={"input": {"question": "Who?", "doc_ids": doc_ids}})
            assert response.status_code in (400, 422), (doc_ids, response.text)
        response = client.post("/chain/invoke", json={"input": {"question": "Who?", "doc_id": "0" * 100_000}})
        assert response.status_code in (400, 422) and "0" * 100 not in response.text
        route = {"requests": ["plot sales"] * 100, "registry": "r", "registry_data": []}
        response = client.post("/route/batch", json={"inputs": [route] * 100})
        assert response.status_code == 413 and "100 route requests in all" in response.json()["detail"]
        response = client.post("/route/batch", json={"inputs": [{**route, "requests": ["plot sales"] * 60}] * 2})
        assert response.status_code == 413
        assert _home_files(longdoc_home) == before


STATELESS = {
    "summarize": {"length": 40},
    "offload": {"question": "Who manages procurement?"},
    "route": {
        "request": "plot sales",
        "registry": "sales",
        "registry_data": [
            {"name": "sales", "description": "sales charts", "tools": [{"name": "plot", "description": "plot"}]}
        ],
    },
}


def test_a_request_without_a_thread_id_leaves_no_checkpoint(longdoc_home: Path) -> None:
    """Nobody could name its thread to resume or forget it: the run keeps nothing in the checkpoint database."""
    with TestClient(create_app(fake_chat_model())) as client:
        doc_id = client.post("/ingest/invoke", json={"input": {"text": FALCON.read_text()}}).json()["output"]["doc_id"]
        rows = _checkpoint_rows(longdoc_home)
        threads = (longdoc_home / "server_threads.sqlite").read_bytes()
        for workflow, value in STATELESS.items():
            value = {**value, "doc_id": doc_id} if workflow != "route" else value
            for kind in ("invoke", "stream", "batch", "stream_log", "stream_events"):
                body = {"inputs": [value, value]} if kind == "batch" else {"input": value}
                response = client.post(f"/{workflow}/{kind}", json=body)
                assert response.status_code == 200 and "event: error" not in response.text, (workflow, kind)
        assert _checkpoint_rows(longdoc_home) == rows
        assert (longdoc_home / "server_threads.sqlite").read_bytes() == threads
        named = {"input": STATELESS["offload"] | {"doc_id": doc_id}, "config": {"configurable": {"thread_id": "kept"}}}
        assert client.post("/offload/invoke", json=named).json()["output"]["turn"] == 1
        assert client.post("/offload/invoke", json=named).json()["output"]["turn"] == 2
        assert _checkpoint_rows(longdoc_home) > rows


BAD_BODIES = {
    "empty": b"",
    "only spaces": b"   ",
    "null": b"null",
    "a list": b"[1, 2]",
    "a string": b'"text"',
    "cut JSON": b'{"input": {"text": "Otters',
    "a missing colon": b'{"input" {}}',
    "input of the wrong type": b'{"input": 5}',
    "inputs of the wrong type": b'{"inputs": 5}',
    "inputs holding null": b'{"inputs": [null]}',
    "config of the wrong type": b'{"input": {}, "config": 7}',
    "configurable of the wrong type": b'{"input": {}, "config": {"configurable": 5}}',
}


@pytest.mark.parametrize("workflow", ["ingest", "chain", "summarize", "offload", "route"])
def test_a_malformed_body_gets_a_4xx_with_a_reason_on_every_route(workflow: str) -> None:
    with TestClient(create_app(fake_chat_model()), raise_server_exceptions=False) as client:
        for kind in ("invoke", "batch", "stream", "stream_log", "stream_events"):
            for name, raw in BAD_BODIES.items():
                response = client.post(f"/{workflow}/{kind}", content=raw, headers={"content-type": "application/json"})
                assert 400 <= response.status_code < 500, (kind, name, response.status_code, response.text[:200])
                assert response.json()["detail"], (kind, name)
        for name, raw in BAD_BODIES.items():
            response = client.post("/forget", content=raw, headers={"content-type": "application/json"})
            assert 400 <= response.status_code < 500 and response.json()["detail"], name
