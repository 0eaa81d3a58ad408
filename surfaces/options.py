"""Command-line options made from the ``Context`` fields: name, type, default, description, choices, bounds.

Every setting a command offers is a field of the workflow's context; :func:`context_option` turns the
field into an option (its type, its choices, and a help text of its description, bounds and default), so
the help cannot drift from what a run does. An option left out is ``None`` and the context's default
applies; :func:`context_values` gathers the ones given. The prompt fields (``worker_prompt``, ...) get no
option: a system prompt is a page of text, changed from ``context=``, LangGraph Studio or an assistant.
"""

from __future__ import annotations

import argparse
import types
import typing
from dataclasses import MISSING, Field, fields
from typing import Any

from nodes.context import Context
from stores.errors import InputError

CONTEXT_DESTS = "_context_fields"
"""Parser default listing the context fields a command has options for."""


def context_field(context: type[Context], name: str) -> Field[Any]:
    """The field ``name`` of ``context`` (KeyError naming the class when it has none)."""
    for f in fields(context):
        if f.name == name:
            return f
    raise KeyError(f"{context.__name__} has no field {name!r}")


def field_default(f: Field[Any]) -> Any:
    """The field's default as a run gets it (a default read from the settings is read now); MISSING if none."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        try:
            return f.default_factory()
        except InputError:  # a malformed LONGDOC_* setting: the run reports it; the help goes without it
            return MISSING
    return MISSING


def option_help(f: Field[Any]) -> str:
    """The help of a field's option: its description, its bounds when it has any, and its default."""
    meta = f.metadata
    text = str(meta.get("description", "")).rstrip()
    low, high = meta.get("min"), meta.get("max")
    if low is not None and high is not None:
        text += f" [{low:g}-{high:g}]"
    elif low is not None:
        text += f" [>= {low:g}]"
    elif high is not None:
        text += f" [<= {high:g}]"
    default = field_default(f)
    if default is not MISSING and default != "" and not isinstance(default, bool):
        text += f" (default: {default})"
    return text.replace("%", "%%")


def _value_type(hint: Any) -> Any:
    """``int`` for ``int``, ``float`` for ``float | None``: the type a command-line value is read as."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return hint if hint in (int, float, str, bool) else str


def context_option(
    parser: argparse.ArgumentParser, context: type[Context], name: str, *flags: str, **overrides: Any
) -> None:
    """Add the option of ``context``'s field ``name`` (``--name-with-dashes`` unless ``flags`` are given).

    A ``bool`` field becomes a switch that turns it on. ``overrides`` go to ``add_argument`` as they are
    (a command that needs a value even when the option is left out sets ``default``).
    """
    f = context_field(context, name)
    kind = _value_type(typing.get_type_hints(context)[name])
    options: dict[str, Any] = {"dest": name, "default": None, "help": option_help(f)}
    if kind is bool:
        options["action"] = "store_true"
    else:
        options["type"] = kind
        if f.metadata.get("choices") is not None:
            options["choices"] = tuple(f.metadata["choices"])
    options.update(overrides)
    parser.add_argument(*(flags or ("--" + name.replace("_", "-"),)), **options)
    parser.set_defaults(**{CONTEXT_DESTS: [*(parser.get_default(CONTEXT_DESTS) or []), name]})


def context_values(args: argparse.Namespace, context: type[Context] = Context) -> dict[str, Any]:
    """The fields of ``context`` given on the command line (options left out are not in it)."""
    names = {f.name for f in fields(context)}
    given = getattr(args, CONTEXT_DESTS, None) or []
    return {name: getattr(args, name) for name in given if name in names and getattr(args, name) is not None}
