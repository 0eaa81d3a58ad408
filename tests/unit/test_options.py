"""Command-line options come from the ``Context`` fields, so their help, choices and defaults match a run's."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import get_args

import pytest

from nodes.chain.context import ChainContext
from nodes.context import Context
from nodes.offload.context import OffloadContext
from nodes.route.context import RouteContext
from nodes.summarize.context import Method, SummarizeContext
from surfaces.cli import build_parser
from surfaces.options import CONTEXT_DESTS, context_field, context_option, context_values, option_help

COMMANDS = {
    "ingest": Context,
    "ask": ChainContext,
    "summarize": SummarizeContext,
    "chat": OffloadContext,
    "canvas": OffloadContext,
    "route": RouteContext,
}
"""Commands whose settings are all made from their workflow's context."""


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _help(parser: argparse.ArgumentParser, flag: str) -> str:
    return next(a.help or "" for a in parser._actions if flag in a.option_strings)


def test_the_help_states_the_default_a_run_gets() -> None:
    route = _subparser("route")
    assert RouteContext().retrieval == "hybrid"
    assert "(default: hybrid)" in _help(route, "--retrieval") and "vector (default)" not in _help(route, "--retrieval")
    assert f"(default: {RouteContext().top_tools})" in _help(route, "--tools")
    assert f"(default: {RouteContext().k})" in _help(route, "--k")
    for command in ("ingest", "ask"):
        assert f"(default: {Context().chunk_size})" in _help(_subparser(command), "--chunk-size")
    summarize = _subparser("summarize")
    assert "[1-10]" in _help(summarize, "--max-rounds") and "(default: 2)" in _help(summarize, "--max-rounds")
    method = next(a for a in summarize._actions if "--method" in a.option_strings)
    assert tuple(method.choices or ()) == get_args(Method) and method.default == "expert-editor"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_setting_of_a_command_is_made_from_its_context(command: str) -> None:
    parser = _subparser(command)
    context = COMMANDS[command]
    names = {f.name for f in fields(context)}
    made = set(parser.get_default(CONTEXT_DESTS) or [])
    settings = {a.dest for a in parser._actions if a.dest in names}
    inputs = {"registry"} if command == "route" else set()  # route's --registry goes in the input
    assert settings and settings <= made | inputs
    for action in parser._actions:
        if action.dest in made:
            field = context_field(context, action.dest)
            assert action.help == option_help(field)
            if field.metadata.get("choices") is not None:
                assert tuple(action.choices or ()) == tuple(field.metadata["choices"])


def test_options_left_out_leave_the_context_defaults() -> None:
    parser = argparse.ArgumentParser()
    context_option(parser, RouteContext, "retrieval")
    context_option(parser, RouteContext, "top_tools", "--tools")
    context_option(parser, RouteContext, "expand")
    context_option(parser, Context, "namespace", "--namespace", default="default")
    assert context_values(parser.parse_args([]), RouteContext) == {"namespace": "default"}
    given = parser.parse_args(["--retrieval", "bm25", "--tools", "3", "--expand"])
    assert context_values(given, RouteContext) == {
        "retrieval": "bm25",
        "top_tools": 3,
        "expand": True,
        "namespace": "default",
    }
    assert context_values(given) == {"namespace": "default"}  # only the fields of the context asked for
    with pytest.raises(SystemExit):
        parser.parse_args(["--retrieval", "nope"])  # the field's choices


def test_an_unknown_field_is_named() -> None:
    with pytest.raises(KeyError, match="RouteContext has no field 'nope'"):
        context_option(argparse.ArgumentParser(), RouteContext, "nope")


def test_summarize_command_reads_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(
        ["summarize", "doc.md", "--questions", "3", "--factcheck", "mark", "--length-fit", "trim", "-n", "team"]
    )
    assert context_values(args, SummarizeContext) == {
        "questions_per_round": 3,
        "factcheck": "mark",
        "length_fit": "trim",
        "namespace": "team",
    }
