"""Typed entities of a request matched to the parameter kinds of tools, and a request's clauses.

A request often carries what a tool takes without naming the tool: a file path ("save it to
/root/html/ai.html") needs a tool with a path parameter, a URL or a domain one that fetches or
looks it up, a quantity to work out a calculator, a date or "today" a clock. The request side is
detected by patterns; the tool side is read from the registry's own input schemas (each
parameter name split into its words and matched against the words of a kind), so no tool or
server is named anywhere here. ``KindIndex.search`` ranks, for each kind the request carries,
the tools that accept it; each such list joins the fusion (``RouteSettings.entity_weight``).

``clauses`` cuts a request into its clauses (sentences, then ``then`` / ``, and`` joints) so that each
part can be searched on its own, a model-free stand-in for decomposition
(``RouteSettings.clause_weight``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from nodes.route.model import NodeId, PerRegistry, Ranked, Registry
from stores.text import split_sentences


@dataclass(frozen=True)
class EntityKind:
    """A kind of value: how it shows in a request, and the words naming a parameter that takes it."""

    name: str
    pattern: re.Pattern[str]
    parameter_words: frozenset[str]


def _kind(name: str, pattern: str, words: str) -> EntityKind:
    return EntityKind(name, re.compile(pattern, re.IGNORECASE), frozenset(words.split()))


_MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_EXTENSIONS = r"txt|md|csv|json|xlsx?|docx?|pptx?|pdf|html?|py|ts|js|png|jpe?g|svg|mp3|wav|log|ya?ml|xml"
_TLDS = r"com|org|net|io|ai|dev|edu|gov|co|cn|uk|de|fr|jp|info|app"

KINDS: tuple[EntityKind, ...] = (
    _kind(
        "path",
        r"(?:^|[\s\"'`(])(?:~|\.{1,2})?/[\w.-]+/[\w./-]*"  # /root/dir/file.ext, ~/notes, ./src/
        r"|[a-z]:\\[\w\\. -]+"  # C:\Users\me
        rf"|\b[\w-]+\.(?:{_EXTENSIONS})\b",  # report.pdf
        "path paths file files filename dir directory folder",
    ),
    _kind("url", r"\bhttps?://\S+|\bwww\.\S+", "url urls uri link href"),
    _kind("domain", rf"(?<![@\w.-])(?:[a-z0-9-]+\.)+(?:{_TLDS})\b(?![\w/])", "domain domains host hostname"),
    _kind("email", r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b", "email emails recipient recipients"),
    _kind(
        "quantity",
        r"\d\s*[-+*/×÷^%]\s*\d"  # 3 * 4
        r"|\b\d+(?:\.\d+)?\s?(?:g|kg|mg|lb|lbs|oz|km|m|cm|mm|mi|ft|kwh|l|ml)\b"  # 18.9g
        r"|\b(?:calculate|compute|estimate|how much|how many|total|sum|average)\b",
        "expression expressions formula equation",
    ),
    _kind(
        "time",
        r"\b(?:today|tonight|tomorrow|yesterday|now|this (?:week|month|year)"
        r"|next (?:week|month|year|months|days)|past (?:\w+ )?(?:days|weeks|months|years)"
        rf"|(?:{_MONTHS})\.? \d{{1,2}}"  # August 8
        r"|\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\d{1,2}\s?(?:am|pm))\b",
        "time timezone timezones date datetime",
    ),
    _kind("code", r"```|`[^`\n]+`|\b\w+\.(?:py|ts|tsx|js|jsx|java|go|rs|rb|cpp|c|h)\b", "code script snippet"),
    _kind("repository", r"\b(?:github|gitlab)\b|\bgit\b|\brepo(?:sitory|sitories|s)?\b", "repo repository repo_path"),
)
"""The kinds of entity the router recognises; a parameter takes a kind when one of its words
(camelCase and snake_case split, lower-cased) is among the kind's ``parameter_words``."""

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_EXTENSION = re.compile(r"\.([a-z][a-z0-9]{1,4})\b", re.IGNORECASE)


def split_words(name: str) -> list[str]:
    """The words of an identifier, lower-cased: ``fileAbsolutePath`` -> ``[file, absolute, path]``."""
    return [w.lower() for w in _WORD.findall(name)] or [name.lower()]


def parameter_words(name: str) -> set[str]:
    """The words that name what a parameter takes: the whole name and its head (last) word.

    ``fileAbsolutePath`` -> ``{fileabsolutepath, path}``; ``source_timezone`` -> ``{..., timezone}``.
    Only the head counts, as in English compounds: ``path_audio_time_series_y`` is a ``y``, not a
    time, and ``timeout_ms`` is not a time either.
    """
    return {name.lower(), split_words(name)[-1]}


def parameter_kinds(name: str) -> set[str]:
    """The entity kinds a parameter named ``name`` takes."""
    words = parameter_words(name)
    return {k.name for k in KINDS if words & k.parameter_words}


def request_kinds(text: str) -> set[str]:
    """The entity kinds present in a request."""
    return {k.name for k in KINDS if k.pattern.search(text)}


def request_formats(text: str) -> set[str]:
    """File formats the request's paths name: their extensions, lower-cased (``/a/b.pptx`` -> ``pptx``)."""
    kind = next(k for k in KINDS if k.name == "path")
    return {ext.lower() for m in kind.pattern.finditer(text) for ext in _EXTENSION.findall(m.group(0))}


class KindIndex:
    """Which entity kinds each tool of a registry takes (from its parameter names), and the words of its text."""

    def __init__(self, registry: Registry) -> None:
        from stores.text import lexical_tokens

        self.kinds: dict[NodeId, tuple[frozenset[str], int]] = {}
        self.words: dict[NodeId, frozenset[str]] = {}
        for agent in registry.agents:
            for tool in agent.tools:
                per_param = [parameter_kinds(p) for p in tool.parameters]
                kinds = frozenset().union(*per_param) if per_param else frozenset()
                if kinds:
                    self.kinds[tool.node] = (kinds, len(tool.parameters))
                    self.words[tool.node] = frozenset(lexical_tokens(f"{tool.text} {agent.text}"))

    def search(self, request: str, ranked_tools: Sequence[NodeId], n: int) -> list[Ranked]:
        """For each kind of entity the request carries, the tools taking it, best first (at most ``n``).

        Within a kind a tool ranks by whether its text names a file format of the request's
        paths (``.pptx`` and a tool about pptx files), then by the share of its parameters of
        that kind (a tool whose one parameter is a path is about paths; one with a path among
        eight options is not), then by its place in ``ranked_tools`` (the request's own
        retrieval), then by registry order. The score is 1 (2 with a format match).
        """
        wanted = request_kinds(request)
        if not wanted or n <= 0:
            return []
        formats = request_formats(request)
        place = {node: i for i, node in enumerate(ranked_tools)}
        out = []
        for kind in sorted(wanted):
            scored = []
            for order, (node, (kinds, n_params)) in enumerate(self.kinds.items()):
                if kind in kinds:
                    fmt = bool(formats & self.words[node])
                    scored.append((-fmt, -1 / n_params, place.get(node, len(place)), order, node))
            scored.sort()
            out.append([(node, 1.0 + (fmt < 0)) for fmt, _share, _place, _order, node in scored[:n]])
        return out


kind_index: PerRegistry[KindIndex] = PerRegistry(KindIndex)
"""The (cached) parameter kinds of a registry's tools."""


_JOINT = re.compile(r",\s*(?:and\s+)?then\b,?\s*|,\s*and\s+|\s+and\s+then\s+|\s+then\s+|^then\b,?\s*", re.IGNORECASE)


def clauses(request: str, min_words: int = 3) -> list[str]:
    """The clauses of a request: its sentences cut again at ``then`` and ``, and``.

    Pieces shorter than ``min_words`` words join the piece before them (or after, for the first).
    A request that is one clause gives ``[]``: it has no parts besides itself.
    """
    pieces: list[str] = []
    for sentence in (part for line in request.splitlines() for part in split_sentences(line)):
        for piece in _JOINT.split(sentence):
            piece = piece.strip(" ,.;")
            if not piece:
                continue
            if pieces and min(len(piece.split()), len(pieces[-1].split())) < min_words:
                pieces[-1] = f"{pieces[-1]} {piece}"
            else:
                pieces.append(piece)
    return pieces if len(pieces) > 1 else []
