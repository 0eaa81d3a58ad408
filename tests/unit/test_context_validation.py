"""The one check of a workflow's settings: bounds declared in the ``Context`` fields, read by ``validate``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from nodes.chain.context import ChainContext
from nodes.context import Context, describe, validate
from nodes.offload.context import OffloadContext, check_context
from nodes.summarize.context import SummarizeContext
from nodes.summarize.context import check_context as check_summarize
from stores.errors import InputError


@dataclass(kw_only=True)
class Knobs(Context):
    mode: str = field(default="fast", metadata=describe("How.", choices=("fast", "slow")))
    rounds: int = field(default=2, metadata=describe("How many.", min=1, max=5))
    budget: int = field(default=0, metadata=describe("How much (0 = no limit).", min=0))
    tokens: int = field(default=40, metadata=describe("How long.", min=20))
    cap: float = field(default=0.5, metadata=describe("How high.", max=1.0))
    note: str = field(default="anything", metadata=describe("Free text."))


def test_settings_within_their_bounds_pass() -> None:
    validate(Knobs())
    validate(Knobs(mode="slow", rounds=1, budget=0, tokens=20, cap=1.0, note="x"))
    validate(Knobs(rounds=5))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mode": "medium"}, "unknown mode 'medium'; choose one of fast, slow"),
        ({"rounds": 0}, "rounds must be between 1 and 5, got 0"),
        ({"rounds": 6}, "rounds must be between 1 and 5, got 6"),
        ({"budget": -1}, "budget must not be negative, got -1"),
        ({"tokens": 19}, "tokens must be at least 20, got 19"),
        ({"cap": 1.5}, "cap must be at most 1.0, got 1.5"),
        ({"rounds": "3"}, "rounds must be a number, got '3'"),
        ({"rounds": True}, "rounds must be a number, got True"),
    ],
)
def test_a_setting_out_of_its_bounds_is_named(values: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as refused:
        validate(Knobs(**values))  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_the_workflows_declare_their_bounds_on_their_fields() -> None:
    with pytest.raises(InputError, match="unknown order 'sideways'; choose one of best-first, "):
        validate(ChainContext(order="sideways"))
    with pytest.raises(InputError, match=r"^roots must be at least 1, got 0$"):
        validate(ChainContext(roots=0))
    with pytest.raises(InputError, match=r"^canvas_max_nodes must be between 1 and 15, got 16$"):
        check_context(OffloadContext(canvas_max_nodes=16))
    with pytest.raises(InputError, match=r"^unknown factcheck 'maybe'; choose one of fix, mark, off$"):
        check_summarize(SummarizeContext(factcheck="maybe"))
    validate(ChainContext())
    check_context(OffloadContext())
    check_summarize(SummarizeContext())


def test_rules_across_fields_stay_with_their_workflow() -> None:
    validate(OffloadContext(policy="last_k", keep_turns=0))  # each field alone is within its bounds
    with pytest.raises(InputError, match="keep_turns must be at least 1 for last_k"):
        check_context(OffloadContext(policy="last_k", keep_turns=0))
    check_context(OffloadContext(policy="full", keep_turns=0))
    with pytest.raises(InputError, match="token_budget must be 0"):
        check_context(OffloadContext(token_budget=100))
    check_context(OffloadContext(token_budget=0))
    with pytest.raises(InputError, match="experts must map"):
        check_summarize(SummarizeContext(experts={"bad name!": "x"}))
