"""The model layer classifies the ``openai`` client's real exception types.

The exceptions are built as the OpenAI client builds them, around ``httpx2`` requests and
responses (the HTTP library ``openai`` uses), and raised by a scripted model that names an
endpoint, so the endpoint gate is exercised too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import httpx
import httpx2
import openai
import pytest
from langchain_core.messages import BaseMessage
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from doubles.chat import ScriptedChatModel
from stores.endpoints import endpoint_gate
from stores.models import LLM, ModelError, messages, use_chat_model
from stores.usage import track_usage

ENDPOINT = "http://models.example/v1"
REQUEST = httpx2.Request("POST", f"{ENDPOINT}/chat/completions")


class EndpointModel(ScriptedChatModel):
    """A scripted model that names its endpoint as ``ChatOpenAI`` does."""

    openai_api_base: str = ENDPOINT


def status_error(kind: type[openai.APIStatusError], status: int) -> openai.APIStatusError:
    response = httpx2.Response(status, request=REQUEST, json={"error": {"message": "no"}})
    return kind("no", response=response, body={"error": {"message": "no"}})


def dropped() -> openai.APIConnectionError:
    """A connection error caused by the peer closing the connection mid-reply, as the client chains it."""
    try:
        try:
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")
        except httpx2.RemoteProtocolError as cause:
            raise openai.APIConnectionError(request=REQUEST) from cause
    except openai.APIConnectionError as exc:
        return exc


@pytest.fixture(autouse=True)
def fresh_gate() -> Iterator[None]:
    endpoint_gate.reset()
    yield
    endpoint_gate.reset()


def raising(exc: BaseException) -> Callable[[Sequence[BaseMessage]], str]:
    def reply(_messages: Sequence[BaseMessage]) -> str:
        raise exc

    return reply


@pytest.mark.parametrize(
    ("exc", "message", "closes"),
    [
        (openai.APITimeoutError(request=REQUEST), "did not answer in time", True),
        (openai.APIConnectionError(request=REQUEST), "cannot be reached", True),
        (dropped(), "dropped the connection before its reply was complete", True),
        (httpx.ReadTimeout("read timed out"), "did not answer in time", True),
        (httpx.RemoteProtocolError("incomplete chunked read"), "dropped the connection", True),
        (status_error(openai.RateLimitError, 429), "kept refusing with 429", True),
        (status_error(openai.InternalServerError, 500), "failed with HTTP 500", True),
        (status_error(openai.APIStatusError, 503), "failed with HTTP 503", True),
        (status_error(openai.AuthenticationError, 401), "refused the API key", False),
        (status_error(openai.PermissionDeniedError, 403), "refused the API key", False),
        (status_error(openai.NotFoundError, 404), "was not found at the endpoint", False),
        (status_error(openai.BadRequestError, 400), "model call to .* failed \\(BadRequestError", False),
        (RuntimeError("Connection refused by policy"), "model call to .* failed \\(RuntimeError", False),
    ],
)
def test_openai_errors_become_model_errors_and_close_the_gate_when_unavailable(
    exc: BaseException, message: str, closes: bool
) -> None:
    model = EndpointModel(default=raising(exc))
    with use_chat_model(model):
        with pytest.raises(ModelError, match=message) as caught:
            LLM("worker").text(messages("s", "q"))
        assert caught.value.__cause__ is exc
        if closes or message.startswith("model call"):
            assert ENDPOINT in str(caught.value)
        if closes:
            with pytest.raises(ModelError, match="not retried for another"):
                LLM("expert").text(messages("s", "another question"))
            assert len(model.calls) == 1  # the closed endpoint was not called again
        else:
            endpoint_gate.check(ENDPOINT)  # still open


def test_an_error_whose_name_only_looks_like_a_timeout_is_not_one() -> None:
    class FakeTimeoutError(Exception):
        pass

    model = EndpointModel(default=raising(FakeTimeoutError("slow")))
    with use_chat_model(model), pytest.raises(ModelError, match="failed \\(FakeTimeoutError: slow\\)"):
        LLM("worker").text(messages("s", "q"))
    endpoint_gate.check(ENDPOINT)


class Answer(BaseModel):
    answer: str


def test_openai_length_finish_reason_is_a_truncated_reply_asked_again_with_a_larger_budget() -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": '{"answer": "Os'}}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 50, "total_tokens": 61},
        }
    )
    cut = openai.LengthFinishReasonError(completion=completion)
    model = EndpointModel(replies=[raising(cut), '{"answer": "Oslo"}'])
    with use_chat_model(model), track_usage() as usage:
        result = LLM("manager", max_retries=2).structured(messages("s", "u"), Answer, max_tokens=50)
    assert result.answer == "Oslo"
    assert usage["manager"]["truncated"] == 1 and usage["manager"]["calls"] == 2
    assert usage["manager"]["output"] >= 50  # the cut reply's tokens are counted
    endpoint_gate.check(ENDPOINT)
