"""The bundled Qwen2.5-Coder-1.5B served by llama.cpp answers through ChatOpenAI, with schema-valid JSON; a role
on the bundled 0.5B gets that model's own server, and the 1.5B drafted by the 0.5B (speculative decoding) answers."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from stores.local_model import SMALL_MODEL, ensure_server, running_server
from stores.models import chat_model, llm_for, messages
from stores.settings import SMALL_MODEL_NAME
from stores.usage import track_usage


class Capital(BaseModel):
    country: str
    capital: str
    confidence: float = Field(ge=0, le=1)


def test_bundled_model_answers_and_reports_usage() -> None:
    with track_usage() as usage:
        text = llm_for("worker").text(
            messages("Answer with one word.", "What is the capital of France?"), max_tokens=10
        )
    assert "paris" in text.lower()
    assert usage["worker"]["input"] > 5 and usage["worker"]["output"] >= 1
    server = running_server()
    assert server is not None and server.base_url.startswith("http://127.0.0.1:")


def test_bundled_model_returns_schema_valid_json() -> None:
    with track_usage() as usage:
        result = llm_for("expert").structured(
            messages("Reply in JSON.", "Which city is the capital of Japan? Give a confidence between 0 and 1."),
            Capital,
            max_tokens=80,
        )
    assert isinstance(result, Capital)
    assert "tokyo" in result.capital.lower()
    assert usage["expert"]["calls"] == 1


class City(BaseModel):
    country: str
    capital: str


def test_chat_openai_structured_output_directly() -> None:
    model = chat_model("worker", max_tokens=60)
    out = model.with_structured_output(City, method="json_schema").invoke("Country: Italy. Give its capital as JSON.")
    assert isinstance(out, City) and "rome" in out.capital.lower()


def test_a_role_on_the_bundled_small_model_answers_from_its_own_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_WORKER_MODEL", SMALL_MODEL_NAME)
    with track_usage() as usage:
        text = llm_for("worker").text(
            messages("Answer with one word.", "What is the capital of France?"), max_tokens=10
        )
    assert "paris" in text.lower() and usage["worker"]["calls"] == 1
    small = running_server(SMALL_MODEL_NAME)
    assert small is not None and small.model == SMALL_MODEL_NAME and small.path.name == SMALL_MODEL.file
    assert running_server() is None  # the 1.5B, which no call asked for, was not started


def test_the_bundled_model_drafted_by_the_small_one_answers_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", SMALL_MODEL_NAME)
    server = ensure_server()
    assert server.draft == SMALL_MODEL_NAME
    body = {
        "messages": [{"role": "user", "content": "Count from one to twelve in words, separated by commas."}],
        "max_tokens": 40,
        "temperature": 0,
    }
    reply = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600).json()
    assert "twelve" in reply["choices"][0]["message"]["content"].lower()
    assert reply["timings"]["draft_n"] > 0 and reply["timings"]["draft_n_accepted"] > 0  # the draft was used
    assert "paris" in llm_for("manager").text(messages("One word.", "Capital of France?"), max_tokens=10).lower()
