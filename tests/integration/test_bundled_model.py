"""The bundled Qwen2.5-Coder-1.5B served by llama.cpp answers through ChatOpenAI, with schema-valid JSON."""

from __future__ import annotations

from pydantic import BaseModel, Field

from stores.local_model import running_server
from stores.models import chat_model, llm_for, messages
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
