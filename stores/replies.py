"""Reading a model's reply: its complete sentences, the JSON object in it, whether it is cut short.

The JSON object may have fences and chatter around it, a cut object is refused; a plain-text reply is checked for
being visibly cut short.
"""

from __future__ import annotations

import json
import re
from typing import Any

from stores.text import count_tokens

_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d]*(?=\s|$)|[\u3002\uff01\uff1f][\u201d\u300d\uff09]*")


def complete_sentences(text: str) -> str:
    """``text`` up to the end of its last complete sentence (empty when it has none)."""
    ends = list(_SENTENCE_END.finditer(text.strip()))
    return text.strip()[: ends[-1].end()] if ends else ""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def _unclosed(text: str) -> bool:
    """True when JSON ``text`` ends inside a string or with an object or array still open.

    The standard library's decoder says only that a text does not parse; this tells a reply cut
    before it closed from one that is malformed in another way.
    """
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def parse_json_object(text: str) -> Any:
    """Parse the JSON object or array of ``text`` (code fences and chatter around it allowed).

    Strict: a reply that is a JSON object cut before it closes is a ValueError, whatever the
    endpoint said about how it finished (never a part of it, nor an object nested inside it).
    """
    cleaned = _FENCE.sub("", text.strip()).strip()
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(cleaned):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(cleaned[i:])
                return value
            except json.JSONDecodeError:
                if _unclosed(cleaned[i:]) and (i == 0 or ch == "{"):
                    raise ValueError("the reply is a JSON object cut off before it closes") from None
                continue
    raise ValueError("no JSON object found in the reply")


_TERMINAL = set(".!?\u2026\u3002\uff01\uff1f)]}\"'\u201d\u2019\u00bb\u300d\u300f\uff09*`")
"""Characters a finished plain-text reply may end with: a sentence's end, or a closing bracket or quote."""
_LIST_LINE = re.compile(r"^\s*(?:[-*+#|>]|\d+[.)])\s")


def cut_reply(text: str) -> str:
    """Why plain-text ``text`` is visibly cut short (empty when it is not).

    A JSON object or string left open, a bracket left open at the end, or a last sentence that
    stops without its final punctuation (a list item or heading as the last line, and a reply of
    at most four tokens such as a name, are left alone).
    """
    cleaned = _FENCE.sub("", text.strip()).strip()
    if not cleaned:
        return ""
    if cleaned[0] in "{[":
        try:
            json.loads(cleaned)
        except json.JSONDecodeError:
            if _unclosed(cleaned):
                return "a JSON object cut off before it closes"
        return ""
    last_line = cleaned.splitlines()[-1]
    if _LIST_LINE.match(last_line) or count_tokens(cleaned) <= 4:  # a list item, a heading, or a short answer
        return ""
    tail = last_line[-12:]
    if tail.rfind("[") > tail.rfind("]") or tail.rfind("(") > tail.rfind(")"):
        return "a bracket left open at the end"
    if cleaned[-1] not in _TERMINAL:
        return "a sentence cut off mid-way"
    return ""
