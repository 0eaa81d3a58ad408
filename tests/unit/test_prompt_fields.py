"""Every role's system prompt is a ``Context`` field whose default is the template file, rendered strictly."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

import prompts
from doubles.chat import ScriptedChatModel
from graphs.chain.graph import graph as chain
from nodes.chain.context import ChainContext
from nodes.context import MAX_PROMPT_CHARS, Context, validate
from nodes.ingest import ingest
from nodes.offload.context import OffloadContext
from nodes.route.context import RouteContext
from nodes.summarize.context import SummarizeContext, check_context
from stores.errors import InputError
from stores.models import use_chat_model
from tests.fakes import quoting

CONTEXTS: tuple[type[Context], ...] = (ChainContext, SummarizeContext, OffloadContext, RouteContext)

SYSTEM_PROMPTS = {
    "chain/worker",
    "chain/manager",
    "summarize/questions",
    "summarize/expert",
    "summarize/merge",
    "summarize/polish",
    "summarize/direct",
    "summarize/factcheck",
    "summarize/map",
    "summarize/collapse",
    "summarize/reduce",
    "summarize/refine",
    "offload/canvas",
    "offload/answer",
    "offload/answer_recall",
    "offload/answer_plain",
    "offload/offloader",
    "route/expand",
    "route/decompose",
}
"""The system prompts of the workflows' model calls (the chain's single-call reader is a benchmark baseline's)."""


def prompt_fields(context: type[Context]) -> dict[str, str]:
    """Field name -> template name of ``context``'s prompt fields."""
    return {f.name: f.metadata["prompt"] for f in fields(context) if "prompt" in f.metadata}


def test_every_role_prompt_is_a_field_whose_default_is_the_english_template() -> None:
    found = {}
    for context in CONTEXTS:
        ctx = context()
        validate(ctx)
        for field_name, name in prompt_fields(context).items():
            assert getattr(ctx, field_name) == prompts.load(name, "en").template
            found[name] = field_name
    assert set(found) == SYSTEM_PROMPTS
    assert found["chain/worker"] == "worker_prompt" and found["offload/offloader"] == "offloader_prompt"


@pytest.mark.parametrize("name", sorted(SYSTEM_PROMPTS))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_default_renders_as_the_template_of_the_documents_language(name: str, lang: str) -> None:
    default = prompts.load(name, "en").template
    values = {n: f"<{n}>" for n in prompts.placeholders(name)}
    text = prompts.render(name, lang, template=default, **values)
    assert text == prompts.load(name, lang).substitute(values).strip()
    assert all(f"<{n}>" in text for n in values)
    if lang == "zh" and (name, "zh") in prompts.all_templates():
        assert text != prompts.render(name, "en", **values)  # the Chinese file, not the English default


def test_a_changed_prompt_is_used_whatever_the_documents_language() -> None:
    changed = "Quote at most $quotes sentences, in any language."
    for lang in ("en", "zh"):
        assert prompts.render("chain/worker", lang, template=changed, quotes=3) == (
            "Quote at most 3 sentences, in any language."
        )
    with pytest.raises(KeyError):
        prompts.render("chain/worker", "en", template=changed)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Quote what helps.", r"^worker_prompt lacks \$quotes, which the prompt fills in$"),
        ("Quote $quotes of $question.", r"^worker_prompt names \$question, which the prompt does not fill in"),
        ("Quote $quotes sentences for $5.", r"^worker_prompt has a '\$' that starts no \$name placeholder"),
        ("  \n", r"^worker_prompt is empty"),
        ("$quotes " + "x" * MAX_PROMPT_CHARS, rf"^worker_prompt is {MAX_PROMPT_CHARS + 8:,} characters long"),
        (42, r"^worker_prompt must be text, got int$"),
    ],
)
def test_a_prompt_the_template_cannot_be_replaced_by_is_refused(value: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        validate(ChainContext(worker_prompt=value))  # type: ignore[arg-type]


def test_every_workflow_checks_its_prompts() -> None:
    with pytest.raises(InputError, match=r"^expert_prompt lacks \$description"):
        check_context(SummarizeContext(expert_prompt="You are the $expert expert. Write in $language."))
    with pytest.raises(InputError, match=r"^reduce_prompt names \$tone"):
        check_context(SummarizeContext(reduce_prompt=prompts.load("summarize/reduce").template + " $tone"))
    with pytest.raises(InputError, match=r"^offloader_prompt names \$turn"):
        validate(OffloadContext(offloader_prompt="Note turn $turn."))
    validate(RouteContext(decompose_prompt="Split the request into at most $max tasks."))


MANAGER = json.dumps({"answer": "40,000 euros", "evidence": ["c1"], "explanation": "Approved in March [c1]."})


@pytest.fixture
def falcon(sample_markdown: Path) -> str:
    return ingest(str(sample_markdown), chunk_size=50, chunk_overlap=0).doc_id


def _scripted() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("manager of a chain", MANAGER)], default=quoting([("euros", "nothing")], otherwise="the budget")
    )


def test_a_prompt_given_in_the_context_reaches_the_model(falcon: str) -> None:
    model = _scripted()
    changed = "You are worker number one. Quote no more than $quotes sentences."
    with use_chat_model(model):
        out = chain.invoke(
            {"question": "What budget was approved?", "doc_id": falcon},
            context={"worker_prompt": changed, "quotes": 4},
        )
    systems = [str(call[0].content) for call in model.calls]
    assert out["answer"] == "40,000 euros"
    workers = [s for s in systems if "worker number one" in s]
    assert workers and set(workers) == {"You are worker number one. Quote no more than 4 sentences."}
    assert len(workers) == out["usage"]["worker"]["calls"]
    manager = prompts.render("chain/manager", "en", reconcile="")
    assert systems[-1] == manager  # the manager's prompt is left at its default


def test_a_bad_prompt_is_refused_before_any_model_call(falcon: str) -> None:
    model = _scripted()
    with use_chat_model(model), pytest.raises(InputError, match=r"^manager_prompt names \$tone"):
        chain.invoke(
            {"question": "What budget was approved?", "doc_id": falcon},
            context={"manager_prompt": "Answer in a $tone tone. $reconcile"},
        )
    assert model.calls == []
