"""Chunk and sentence labels: the one grammar of what prompts show and answers cite.

A chunk is labelled by its position in its document, ``c12``; a sentence of it by its number in
the chunk, ``c12.3``. In a run over several documents each label names its document by the run's
tag for it: ``2:c12``, ``2:c12.3``. :func:`label_position` is the one sort key of labels, tagged or
not; the patterns here are the only ones that read labels out of replies and prompts.
"""

from __future__ import annotations

import re

from stores.errors import InputError

CHUNK = r"(?:\d+:)?c\d+"
"""A chunk label, tagged or not (a regex without groups)."""
SENTENCE = CHUNK + r"\.\d+"
"""A sentence label, tagged or not (a regex without groups)."""
LABEL = re.compile(r"^(?:(\d+):)?(c\d+)(?:\.(\d+))?$")
"""A chunk or sentence label, tagged (``2:c12``, ``2:c12.3``) or not (``c12``, ``c12.3``): tag, chunk, sentence."""
TAG_STRIDE = 1_000_000
"""Positions of a collection's chunks: the document's tag times this, plus the chunk's own position."""

# --- in replies and prompts -----------------------------------------------------------------------
CITED = re.compile(rf"\[({CHUNK}(?:\.\d+)?)\]")
"""A chunk or sentence cited in brackets, ``[c3]``, ``[2:c3.4]``; group 1 is the label."""
CITED_GROUP = re.compile(r"\[\s*((?:\d+:\s*)?c?\d+(?:\s*[,;、，]\s*(?:\d+:\s*)?c?\d+)*)\s*\]", re.IGNORECASE)
"""Chunks cited in one pair of brackets as a model may write them: ``[c3]``, ``[c3, c5]``, ``[3]``, ``[2:c3]``."""
SCHEMA_SENTENCE = "^c[0-9]+[.][0-9]+$"
"""A sentence label as a JSON schema shown to a model writes its pattern (``c3.2``)."""
SCHEMA_TAGGED_SENTENCE = "^[0-9]+:c[0-9]+[.][0-9]+$"
"""A tagged sentence label as a JSON schema writes its pattern (``2:c3.2``)."""
SENTENCE_ONLY = re.compile(rf"^\s*\[?\s*({SENTENCE})\s*\]?\s*$")
"""A reply that is one sentence label, perhaps bracketed; group 1 is the label."""
QUOTE_LINE = re.compile(rf"^\[({SENTENCE})\] ")
"""The start of an evidence line, ``[c3.2] `` or ``[2:c3.2] ``; group 1 is the label."""
_LOOSE = re.compile(r"\[?\s*(?:(\d+)\s*:\s*)?[cC]?\s*(\d+)\s*\]?")
"""A chunk id as a model may write it: ``c3``, ``[c3]``, ``C3``, ``3``, ``2:c3``, ``[2: c3]``."""


def sentences_cited(text: str) -> list[str]:
    """The sentence labels cited in brackets in ``text`` (``[c3.2]``, ``[2:c3.2]``), in order."""
    return [label for label in CITED.findall(text) if "." in label]


def chunk_label(position: int, tag: int | None = None) -> str:
    """The label of the chunk at ``position`` (``c12``); with a collection tag, ``2:c12``."""
    return f"c{position}" if tag is None else tagged(tag, f"c{position}")


def sentence_label(chunk: str, number: int) -> str:
    """The label of sentence ``number`` (from 1) of the chunk labelled ``chunk``: ``c12.3``, ``2:c12.3``."""
    return f"{chunk}.{number}"


def tagged(tag: int, label: str) -> str:
    """``label`` (``c12`` or ``c12.3``) with a collection tag: ``2:c12``."""
    return f"{tag}:{label}"


def split_label(label: str) -> tuple[int | None, str]:
    """``"2:c12.3"`` -> ``(2, "c12.3")``; ``"c12"`` -> ``(None, "c12")``; InputError when it is no label."""
    found = LABEL.match(label.strip())
    if found is None:
        raise InputError(f"not a chunk or sentence label: {label!r}")
    tag, chunk, sentence = found.groups()
    return (int(tag) if tag else None), chunk + (f".{sentence}" if sentence else "")


def label_tag(label: str) -> int | None:
    """The collection tag a label names (``2:c3`` -> 2), None when it has none or is no label."""
    found = LABEL.match(label.strip())
    return int(found.group(1)) if found is not None and found.group(1) else None


def label_position(label: str) -> tuple[int, int, int]:
    """The sort key of labels, tagged or not: document tag (0 for none), chunk number, sentence number (0 for none).

    ``(0, 0, 0)`` for what is no label.
    """
    found = LABEL.match(label.strip())
    if found is None:
        return (0, 0, 0)
    tag, chunk, sentence = found.groups()
    return int(tag or 0), int(chunk[1:]), int(sentence or 0)


def chunk_of(label: str) -> str:
    """The chunk a label names: ``2:c3.4`` -> ``2:c3``, ``c3`` -> ``c3``."""
    return label.split(".")[0]


def citations_in(text: str) -> list[str]:
    """Chunk ids cited as ``[c3]``, ``[c3, c5]``, ``[3]`` or ``[2:c3]`` in ``text``, in order, without repeats."""
    out: list[str] = []
    for match in CITED_GROUP.finditer(text):
        for part in re.split(r"[,;、，]", match.group(1)):
            cid = normalise_chunk_id(part)
            if cid and cid not in out:
                out.append(cid)
    return out


def normalise_chunk_id(value: str) -> str:
    """A chunk id as a model wrote it, made canonical; ``""`` when it is no chunk id.

    ``"c3"``, ``"[c3]"``, ``"C3"`` or ``"3"`` -> ``"c3"``; ``"2:c3"`` -> ``"2:c3"``.
    """
    found = _LOOSE.fullmatch(str(value).strip())
    if found is None:
        return ""
    tag, number = found.groups()
    return chunk_label(int(number), int(tag) if tag else None)
