"""Reading a model's reply: its complete sentences, and the JSON object in it (fences and chatter around it allowed)."""

from __future__ import annotations

import json
import re
from typing import Any

_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d]*(?=\s|$)|[\u3002\uff01\uff1f][\u201d\u300d\uff09]*")


def complete_sentences(text: str) -> str:
    """``text`` up to the end of its last complete sentence (empty when it has none)."""
    ends = list(_SENTENCE_END.finditer(text.strip()))
    return text.strip()[: ends[-1].end()] if ends else ""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_object(text: str) -> Any:
    """Parse the first JSON object or array in ``text`` (code fences and chatter around it allowed)."""
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
                continue
    raise ValueError("no JSON object found in the reply")
