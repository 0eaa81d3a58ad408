"""Scripted models for tests (and the ``--fake`` runs of the benchmarks): replies made from the prompts.

``offload_reply`` answers every prompt of the offload workflow, ``summarize_reply`` every prompt of the
summarize workflow, ``chain_reply`` every prompt of the ask workflow and ``workflow_reply`` every prompt of
the three; ``offload_chat_model`` / ``summarize_chat_model`` / ``workflow_chat_model`` wrap them in a
``ScriptedChatModel`` that records its calls and can sleep per call.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel


def _first_sentence(text: str) -> str:
    """The first sentence of ``text`` (at most 200 characters), without ellipses."""
    text = re.sub(r"\s*…\s*", " ", text).strip()
    match = re.match(r"(.+?[.!?。！？])(\s|$)", text)
    return (match.group(1) if match else text)[:200].strip()


# --- a scripted model that plays every role of the offload workflow -----------------------------
_LINE = re.compile(r"^\[((?:\d+:)?c\d+)\] (?:\(([^)]*)\) )?(.+)$")
_QUOTE = re.compile(r"^\[((?:\d+:)?c\d+(?:\.\d+)?)\] (.+)$")
_DETAILS = ("Quotes from the documents:", "文档中的引文：")
_PRONOUN = re.compile(r"\b(they|he|she|them|him|her)\b", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b")


def _detail_lines(user: str) -> list[tuple[str, str]]:
    start = max(user.rfind(label) for label in _DETAILS)
    if start < 0:
        return []
    out = []
    for line in user[start:].splitlines()[1:]:
        match = _QUOTE.match(line)
        if not match:
            break
        out.append((match.group(1), match.group(2)))
    return out


def _asked(user: str) -> str:
    found: list[str] = re.findall(r"^(?:Question|问题)[:：] ?(.+)$", user, re.M)
    return found[-1] if found else ""


def standalone_reply(user: str) -> str:
    """The latest message with its pronouns replaced by the last full name the earlier turns mention."""
    message = (re.findall(r"^(?:Latest message|最新消息)[:：] ?(.+)$", user, re.M) or [""])[-1]
    names: list[str] = _NAME.findall(re.split(r"Latest message|最新消息", user)[0])
    question: str = _PRONOUN.sub(names[-1], message) if names else message
    return json.dumps({"question": question})


def offload_reply(messages: Sequence[BaseMessage]) -> str:
    """A valid reply for any offload prompt, made from the prompt's own text (for tests and timing)."""
    system, user = str(messages[0].content), str(messages[-1].content)
    if '"nodes"' in system:
        limit = int((re.findall(r"(?:at most|最多) (\d+)", system) or ["8"])[0])
        nodes: list[dict[str, Any]] = []
        for line in user.splitlines():
            match = _LINE.match(line)
            if match and len(nodes) < limit:
                label = match.group(2) or " ".join(match.group(3).split()[:4])
                nodes.append(
                    {"id": f"n{len(nodes) + 1}", "label": label, "kind": "step", "chunk_ids": [match.group(1)]}
                )
        edges = [{"source": a["id"], "target": b["id"], "label": "then"} for a, b in itertools.pairwise(nodes)]
        return json.dumps({"title": "Canvas", "nodes": nodes, "edges": edges})
    if '"conclusion"' in system:
        answer = (re.findall(r"(?:Answer|回答)[:：] (.+)", user) or [""])[-1]
        sentence = _first_sentence(answer)
        facts = [sentence] if re.search(r"\d", sentence) else []
        return json.dumps({"conclusion": sentence or "no answer", "facts": facts, "goal": ""})
    if '"question"' in system and ("Latest message" in user or "最新消息" in user):
        return standalone_reply(user)
    if '"quotes"' in system:  # a worker of the reading a turn runs
        return chain_reply(messages)
    found = _detail_lines(user)
    if found:  # the quote sharing most words with the question, the first on a tie
        asked = _words(_asked(user))
        cid, text = max(found, key=lambda f: len(asked & _words(f[1])))
        text_answer = f"{_first_sentence(text)} [{cid}]"
        citations = [cid]
    else:
        text_answer, citations = "The memory does not hold the answer.", []
    if '"answer"' in system:
        # the keys in the schema's order, as a grammar-constrained model writes them (recall first when asked)
        reply: dict[str, Any] = {"recall": []} if '"recall"' in system else {}
        reply.update(answer=text_answer, citations=citations)
        return json.dumps(reply)
    return text_answer


def offload_chat_model(delay: float = 0.0) -> ScriptedChatModel:
    """The scripted offload model, sleeping ``delay`` seconds per call."""
    return ScriptedChatModel(default=offload_reply, delay=delay)


# --- a scripted model that plays every role of the summarize workflow ---------------------------
_EXCERPT = re.compile(r"\[((?:\d+:)?c\d+)\](?: \([^)]*\))? (.+)")


def _excerpts(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_EXCERPT.match, text.splitlines()) if m]


def _after(text: str, labels: Sequence[str], stops: Sequence[str] = ()) -> str | None:
    """The part of ``text`` after the first of ``labels`` found, cut at the first of ``stops``."""
    for label in labels:
        if label in text:
            part = text.split(label, 1)[1]
            for stop in stops:
                part = part.split(stop, 1)[0]
            return part.strip()
    return None


def summarize_reply(messages: Sequence[BaseMessage]) -> str:
    """A valid reply for any summarize prompt, made from the prompt's own excerpts (for tests and timing)."""
    system, user = str(messages[0].content), str(messages[-1].content)
    if '"questions"' in system:
        n = int(re.findall(r"(?:Write|写出) (\d+)", user)[-1])
        experts = re.findall(r"^- ([\w-]+): ", system, re.M) or ["fact"]
        sections = re.findall(r"([^;\n]+?) \[c\d+\]", (re.findall(r"Sections: (.*)", user) or [""])[0])
        topics = [t.strip() for t in sections] or ["the main topic", "the decisions", "the people", "the plans"]
        asked = len(re.findall(r"^- ", _after(user, ["Questions already asked:", "已经问过的问题："]) or "", re.M))
        kinds = ("fact", "opinion", "structure", "style")
        items = [
            {
                "question": f"What does the document say about {topics[(asked + i) % len(topics)]}? ({asked + i})",
                "type": kinds[i % 4],
                "target_expert": experts[i % len(experts)],
            }
            for i in range(n)
        ]
        return json.dumps({"questions": items})
    if '"answer"' in system:
        found = _excerpts(user)
        if not found:
            return json.dumps({"answer": "not found", "citations": [], "confidence": 0})
        cid, text = found[0]
        return json.dumps({"answer": f"{_first_sentence(text)} [{cid}]", "citations": [cid], "confidence": 0.8})
    if '"draft"' in system:
        draft = _after(user, ["Current draft:", "当前草稿："], ["New answers:", "新的回答："]) or ""
        draft = "" if draft.startswith(("(", "（")) else draft
        answers = re.findall(r"A \(confidence [\d.]+\): (.+)", user)
        merged = " ".join([draft, *[a for a in answers if a not in draft]]).strip()
        return json.dumps(
            {"draft": merged, "completeness": 3, "accuracy": 4, "coherence": 4, "done": False, "missing": "details"}
        )
    if '"verdicts"' in system:
        count = len(re.findall(r"^\d+\. ", _after(user, ["Sentences:", "句子："]) or "", re.M))
        return json.dumps({"verdicts": [{"n": i, "supported": True, "fix": ""} for i in range(1, count + 1)]})
    refine = re.search(r"(?:New excerpt|新片段) \[((?:\d+:)?c\d+)\][:：]\n(.+)", user, re.S)
    if refine:
        summary = _after(user, ["Summary so far:", "目前的摘要："], ["New excerpt", "新片段"]) or ""
        head = "" if summary.startswith(("(", "（")) else summary
        return f"{head} {_first_sentence(refine.group(2))} [{refine.group(1)}]".strip()
    one = re.search(r"(?:Excerpt|片段) \[((?:\d+:)?c\d+)\][:：]\n(.+)", user, re.S)
    if one:
        return f"{_first_sentence(one.group(2))} [{one.group(1)}]"
    notes = _after(user, ["Notes:", "笔记："])
    if notes is not None:
        lines = [n[2:] for n in notes.splitlines() if n.startswith("- ")]
        return " ".join(lines or [notes])
    polished = _after(user, ["Draft:", "草稿："])
    if polished is not None:
        return polished
    if _after(user, ["Excerpts:", "文档片段："]) is not None:
        return " ".join(f"{_first_sentence(t)} [{c}]" for c, t in _excerpts(user))
    return "Nothing relevant."


def summarize_chat_model(delay: float = 0.0) -> ScriptedChatModel:
    """The scripted summarize model, sleeping ``delay`` seconds per call."""
    return ScriptedChatModel(default=summarize_reply, delay=delay)


# --- a scripted model that plays every role of the ask workflow, and one for the three workflows ----------
_LABELLED = re.compile(r"\[((?:\d+:)?c\d+\.\d+)\] (.+?)(?= \[(?:\d+:)?c\d+\.\d+\] |$)")


def shown_sentences(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """``(label, sentence)`` of every sentence a chain worker's prompt shows it."""
    user = str(messages[-1].content)
    part = re.split(r"^(?:Passages|段落)[:：]$", user, flags=re.M)[-1]
    return [(m.group(1), m.group(2)) for line in part.splitlines() for m in _LABELLED.finditer(line)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w{4,}", text)}


def chain_reply(messages: Sequence[BaseMessage]) -> str:
    """A valid reply for any ask prompt: workers quote the shown sentences sharing a word with the question, the
    manager answers with the first quote's sentence and cites it."""
    system, user = str(messages[0].content), str(messages[-1].content)
    if "manager of a chain" in system:
        quotes = re.findall(r"^\[((?:\d+:)?c\d+\.\d+)\] (.+)$", user, re.M)
        if not quotes:
            return json.dumps({"answer": "unknown", "evidence": [], "explanation": ""})
        label, sentence = quotes[0]
        return json.dumps({"answer": sentence, "evidence": [label], "explanation": f"{sentence} [{label}]"})
    asked = _words((re.findall(r"^(?:Question|问题)[:：] ?(.+)$", user, re.M) or [""])[0])
    labels = [label for label, sentence in shown_sentences(messages) if asked & _words(sentence)]
    return json.dumps({"quotes": labels[:3], "missing": ""})


def workflow_reply(messages: Sequence[BaseMessage]) -> str:
    """A valid reply for any prompt of ask, summarize and chat, made from the prompt's own text."""
    system, user = str(messages[0].content), str(messages[-1].content)
    if "chain of readers" in system:
        return chain_reply(messages)
    chat = ("memory" in system or "记忆" in system) or any(mark in user for mark in ("Latest message", "最新消息"))
    if '"nodes"' in system or '"conclusion"' in system or chat or any(mark in user for mark in _DETAILS):
        return offload_reply(messages)
    return summarize_reply(messages)


def workflow_chat_model(delay: float = 0.0) -> ScriptedChatModel:
    """The scripted model of ask, summarize and chat, sleeping ``delay`` seconds per call."""
    return ScriptedChatModel(default=workflow_reply, delay=delay)
