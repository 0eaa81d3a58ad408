"""The ``LONGDOC_*`` environment read by pydantic-settings: blanks are unset, a malformed value is named."""

from __future__ import annotations

import pytest

from stores.errors import InputError
from stores.settings import BUNDLED_MODEL_NAME, get_settings


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LONGDOC_N_CTX", "big", "LONGDOC_N_CTX must be an integer, got 'big'"),
        ("LONGDOC_THREADS", "2.5", "LONGDOC_THREADS must be an integer, got '2.5'"),
        ("LONGDOC_TEMPERATURE", "warm", "LONGDOC_TEMPERATURE must be a number, got 'warm'"),
        ("LONGDOC_ENDPOINT_COOLDOWN", "soon", "LONGDOC_ENDPOINT_COOLDOWN must be a number, got 'soon'"),
        ("LONGDOC_LLM_CACHE", "maybe", "LONGDOC_LLM_CACHE must be on or off, got 'maybe'"),
        ("LONGDOC_WORKER_TEMPERATURE", "hot", "LONGDOC_WORKER_TEMPERATURE must be a number, got 'hot'"),
    ],
)
def test_a_malformed_variable_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InputError) as refused:
        get_settings()
    assert str(refused.value) == message


def test_values_are_read_stripped_and_blanks_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MODEL", "  small-model ")
    monkeypatch.setenv("LONGDOC_BASE_URL", "   ")
    monkeypatch.setenv("LONGDOC_EMBEDDER", "HASH")
    monkeypatch.setenv("LONGDOC_N_BATCH", "4")
    monkeypatch.setenv("LONGDOC_MAX_CONCURRENCY", "0")
    monkeypatch.setenv("LONGDOC_REQUEST_TIMEOUT", "12")
    monkeypatch.setenv("LONGDOC_LLM_CACHE", "yes")
    monkeypatch.setenv("LONGDOC_EDITOR_TEMPERATURE", "0.4")
    settings = get_settings()
    assert (settings.model, settings.base_url, settings.embedder) == ("small-model", None, "hash")
    assert (settings.n_batch, settings.max_concurrency, settings.read_timeout) == (16, None, 12.0)
    assert settings.llm_cache is True and settings.roles == {"editor": {"temperature": "0.4"}}
    assert settings.role("editor").temperature == 0.4 and settings.role("worker").temperature == 0.0
    assert settings.role("worker").model == "small-model"
    monkeypatch.setenv("LONGDOC_READ_TIMEOUT", "7")
    monkeypatch.delenv("LONGDOC_MODEL")
    again = get_settings()  # a changed environment is read again
    assert again.read_timeout == 7.0 and again.role("worker").model == BUNDLED_MODEL_NAME
