"""The fact-checker: every sentence of a summary is checked against the chunks it cites.

A summary is split into sentences, each with the chunk ids it cites (``[c3]``). A sentence that
cites nothing is given the chunks that best match it (hybrid search) as candidate evidence. The
checker model reads, for a batch of sentences, the relevant part of every cited chunk and says
for each sentence whether the evidence supports it, with a corrected sentence when it does not.
A grounding check needs no model: every number and name of a sentence, and a share of its content
words, must be in the full text of the chunks it cites (a negation, in a cited passage on the same
thing). A sentence is flagged when either check says no, and keeps which one did. In ``fix`` mode
flagged sentences are replaced by a grounded correction, kept as ``disputed`` (weak flags) or
dropped; in ``mark`` mode they are only labelled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

import prompts
from nodes.expert import CITATION, bad_output, citations_in, language_name
from nodes.retrieval import focus_snippet, hybrid_search
from stores.models import LLM, Usage, merge_usage, messages
from stores.settings import ModelError
from stores.text import STOPWORDS, content_words, lexical_tokens, overlap, split_sentences
from stores.vectorstore import VectorStore

FactcheckMode = Literal["fix", "mark", "off"]
Checks = Literal["model", "grounding", "both"]
Verdict = Literal["supported", "fixed", "dropped", "disputed", "unsupported", "unchecked", "source"]
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+")


class SentenceVerdict(BaseModel):
    """The checker's verdict on one numbered sentence."""

    n: int = Field(ge=1, description="Number of the sentence.")
    supported: bool = Field(description="True when the evidence states what the sentence says.")
    fix: str = Field(default="", max_length=500, description="A corrected sentence when not supported, else empty.")


class Verdicts(BaseModel):
    """Verdicts for a batch of sentences."""

    verdicts: list[SentenceVerdict] = Field(max_length=20)


_CITES_NOTE = re.compile(r"\s*[(（](?:cites|引用)[^)）]*[)）]", re.IGNORECASE)


_MARKUP = re.compile(r"\{[a-z]+\}")
_FILLER = re.compile(r",?[ \t]*(?<![\w-])(?:uh|um|mm|hmm|erm|er|ah|eh|uh-huh|mm-hmm)(?![\w-])[,.]?", re.IGNORECASE)
_REPEAT = re.compile(r"\b(\w+)(?:[ \t]+\1\b)+", re.IGNORECASE)


def tidy_excerpt(text: str) -> str:
    """Transcript text without markup (``{disfmarker}``), fillers (uh, um) and stutters ("the the")."""
    text = _REPEAT.sub(r"\1", _FILLER.sub(" ", _MARKUP.sub(" ", text)))
    text = re.sub(r"[ \t]+([,.;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text))
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text).strip(" ,;")
    return text[:1].upper() + text[1:] if text else text


def content_tokens(text: str) -> set[str]:
    """Words that carry content: no stopwords; for Chinese, character bigrams."""
    return content_words(text, cjk_chars=False)


def coverage(text: str, source: str) -> float:
    """Share of ``text``'s content words that occur in ``source`` (1.0 for a text without any)."""
    return overlap(content_tokens(text), content_tokens(source), empty=1.0)


def clean_sentence(text: str) -> str:
    """A sentence without citation markers, bullet marks or stray spaces."""
    text = _CITES_NOTE.sub("", CITATION.sub("", _BULLET.sub("", text)))
    text = re.sub(r"\s+([,.;:!?，。；：！？])", r"\1", text)
    return re.sub(r"\s{2,}", " ", text).strip()


def parse_cited_sentences(text: str, valid_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Split a summary into ``[{"text", "citations"}]``; citations outside ``valid_ids`` are dropped.

    Bullet items are split into sentences too. Citations written after the sentence's full stop
    (``... euros. [c1]``) belong to the sentence before them.
    """
    valid = set(valid_ids) if valid_ids is not None else None
    out: list[dict[str, Any]] = []
    for block in text_blocks(text):
        for piece in split_sentences(block):
            lead = re.match(r"^((?:\s*\[[^\]]*\])+)", piece)
            if lead and out:
                out[-1]["citations"] = _merge_ids(out[-1]["citations"], citations_in(lead.group(1)), valid)
                piece = piece[lead.end() :]
            sentence = clean_sentence(piece)
            if not re.search(r"\w", sentence):
                continue
            out.append({"text": sentence, "citations": _merge_ids([], citations_in(piece), valid)})
    return out


def text_blocks(text: str) -> list[str]:
    """Paragraphs and bullet items of ``text``, each on one line (wrapped lines joined; headings left out)."""
    blocks: list[list[str]] = []
    open_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(r"#{1,6}\s.*|[-=*_]{3,}", line):
            open_block = False
            continue
        if _BULLET.match(line):
            blocks.append([_BULLET.sub("", line)])
            open_block = True
        elif open_block:
            blocks[-1].append(line)
        else:
            blocks.append([line])
            open_block = True
    return [" ".join(block) for block in blocks]


def dedupe_sentences(sentences: Sequence[dict[str, Any]], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Sentences minus those whose words mostly repeat an earlier (or later, longer) sentence."""
    keys = [set(lexical_tokens(s["text"])) for s in sentences]
    keep: list[int] = []
    for i, key in enumerate(keys):
        if not key:
            continue
        repeated = False
        for j in list(keep):
            overlap = len(key & keys[j]) / min(len(key), len(keys[j]))
            if overlap >= threshold:
                if len(key) > len(keys[j]):
                    keep.remove(j)
                else:
                    repeated = True
                break
        if not repeated:
            keep.append(i)
    return [dict(sentences[i]) for i in sorted(keep)]


def _merge_ids(old: list[str], new: Sequence[str], valid: set[str] | None) -> list[str]:
    out = list(old)
    for cid in new:
        if (valid is None or cid in valid) and cid not in out:
            out.append(cid)
    return out


def render_summary(sentences: Sequence[dict[str, Any]], fmt: str, lang: str = "en") -> str:
    """The summary text (no citation markers): prose paragraphs or one bullet per sentence."""
    texts = [s["text"] for s in sentences]
    if fmt == "bullets":
        return "\n".join(f"- {t}" for t in texts)
    return ("" if lang == "zh" else " ").join(texts)


def with_citations(sentences: Sequence[dict[str, Any]], fmt: str, lang: str = "en") -> str:
    """The summary with each sentence's citations appended as ``[c1, c3]``."""
    marked = [
        {"text": f"{s['text']} [{', '.join(s['citations'])}]" if s.get("citations") else s["text"]} for s in sentences
    ]
    return render_summary(marked, fmt, lang)


def evidence_for(store: VectorStore, doc_id: str, batch: Sequence[dict[str, Any]], chunk_tokens: int) -> str:
    """Evidence text for a batch of sentences: each cited chunk once, cut around the claims citing it."""
    claims: dict[str, list[str]] = {}
    for sentence in batch:
        for cid in sentence["citations"]:
            claims.setdefault(cid, []).append(sentence["text"])
    hits = store.get([f"{doc_id}:{cid}" for cid in claims])
    blocks = [f"[{h.chunk_id}] {focus_snippet(h.text, ' '.join(claims[h.chunk_id]), chunk_tokens)}" for h in hits]
    return "\n\n".join(blocks)


def grounded_fix(fix: str, original: str, source: str, threshold: float = 0.6) -> bool:
    """True when a correction is a new sentence whose content words mostly come from the cited chunks."""
    fixed = clean_sentence(fix)
    return bool(fixed) and fixed != clean_sentence(original) and coverage(fixed, source) >= threshold


def retrieve_citations(store: VectorStore, doc_id: str, sentence: str, k: int, prefer: Sequence[str] = ()) -> list[str]:
    """Chunk ids for a sentence that cites nothing: best matches among ``prefer`` first, else overall."""
    hits = hybrid_search(store, doc_id, sentence, max(k, 8) if prefer else k)
    preferred = [h.chunk_id for h in hits if h.chunk_id in set(prefer)]
    return (preferred or [h.chunk_id for h in hits])[:k]


def check_sentences(
    sentences: Sequence[dict[str, Any]],
    *,
    store: VectorStore,
    doc_id: str,
    llm: LLM | None,
    lang: str = "en",
    mode: FactcheckMode = "fix",
    checks: Checks = "both",
    batch_size: int = 6,
    chunk_tokens: int = 140,
    max_citations: int = 2,
    prefer: Sequence[str] = (),
    keep_coverage: float = 0.9,
) -> tuple[list[dict[str, Any]], Usage]:
    """Check every sentence against its cited chunks: by the checker model, by grounding, or both.

    The model reads the cited excerpts and judges each sentence; grounding
    (:func:`grounding_problems`) needs every number and name of the sentence, and most of its
    content words, in the full text of the cited chunks. ``both`` flags a sentence when either
    check does. Returns one entry per input sentence: ``{text, citations, verdict, original,
    model_supported, grounding, flagged_by}`` where ``model_supported`` is the model's verdict
    (None when it gave none), ``grounding`` lists the grounding problems, ``flagged_by`` names
    the checks that flagged it, and verdict is ``supported``, ``fixed`` (the model's correction,
    accepted when its content words come from the cited chunks and it passes grounding),
    ``dropped``, ``disputed`` (fix mode, kept and flagged: flagged by the model alone, without a
    usable correction, while at least ``keep_coverage`` of its content words are in the cited
    chunks; or flagged only for weak grounding problems, ``WEAK_PROBLEMS``), ``unsupported`` (mark mode) or
    ``unchecked`` (checking was off, or the model's output stayed invalid: its grounding problems
    are still listed). Sentences citing nothing get the best-matching chunks as citations
    (``cited_by: "retrieval"``), taken from ``prefer`` (e.g. the chunks the draft cited) when
    any of those match.
    """
    results: list[dict[str, Any]] = []
    for s in sentences:
        cites = list(s.get("citations", []))[:max_citations]
        entry = {"text": s["text"], "original": s["text"], "citations": cites, "cited_by": "model"}
        if not cites and mode != "off":
            entry["citations"] = retrieve_citations(store, doc_id, s["text"], max_citations, prefer)
            entry["cited_by"] = "retrieval"
        entry.update({"verdict": "unchecked", "model_supported": None, "grounding": [], "flagged_by": []})
        results.append(entry)
    if mode == "off":
        return results, {}
    checkable = [r for r in results if r["citations"]]
    cited = dict.fromkeys(f"{doc_id}:{c}" for r in checkable for c in r["citations"])
    sources = {h.chunk_id: h.text for h in store.get(list(cited))}
    if checks != "model":
        for entry in checkable:
            entry["grounding"] = grounding_problems(entry["text"], _source(entry, sources))
    fixes: dict[int, str] = {}
    usage: Usage = {}
    if checks != "grounding":
        if llm is None:
            raise ValueError("the model check needs a model")
        for start in range(0, len(checkable), batch_size):
            batch = checkable[start : start + batch_size]
            numbered = "\n".join(
                f"{i}. {r['text']} (cites {', '.join(r['citations'])})" for i, r in enumerate(batch, start=1)
            )
            system = prompts.render("summarize/factcheck", lang, language=language_name(lang))
            evidence = evidence_for(store, doc_id, batch, chunk_tokens)
            user = prompts.render("summarize/factcheck_user", lang, evidence=evidence, sentences=numbered)
            try:
                reply, used = llm.structured(messages(system, user), Verdicts, max_tokens=60 * len(batch) + 80)
            except ModelError as exc:
                if not bad_output(exc):
                    raise
                for entry in batch:
                    entry["error"] = str(exc)[:300]
                continue
            usage = merge_usage(usage, used)
            by_n = {v.n: v for v in reply.verdicts}
            for i, entry in enumerate(batch, start=1):
                verdict = by_n.get(i)
                if verdict is not None:
                    entry["model_supported"] = verdict.supported
                    fixes[id(entry)] = verdict.fix
    for entry in checkable:
        _decide(entry, mode, checks, fixes.get(id(entry), ""), _source(entry, sources), keep_coverage)
    return results, usage


def _source(entry: dict[str, Any], sources: dict[str, str]) -> str:
    return " ".join(sources.get(c, "") for c in entry["citations"])


def _decide(
    entry: dict[str, Any], mode: FactcheckMode, checks: Checks, fix: str, source: str, keep_coverage: float
) -> None:
    """Set the verdict of one checked sentence from the model's judgement and the grounding problems.

    A sentence no check flagged is ``supported`` when the model confirmed it (or grounding was the
    only check), and stays ``unchecked`` when the model gave no verdict. A sentence whose model check
    failed (invalid output) stays ``unchecked`` whatever grounding found: the check did not complete,
    and its grounding problems are still reported.
    """
    model, grounding = entry["model_supported"], entry["grounding"]
    entry["flagged_by"] = [name for name, flagged in (("model", model is False), ("grounding", grounding)) if flagged]
    if "error" in entry:
        return
    if not entry["flagged_by"]:
        if model is True or checks == "grounding":
            entry["verdict"] = "supported"
        return
    if mode == "mark":
        entry["verdict"] = "unsupported"
    elif fix and grounded_fix(fix, entry["text"], source) and not grounding_problems(clean_sentence(fix), source):
        entry["verdict"] = "fixed"
        entry["text"] = clean_sentence(fix)
        entry["citations"] = [c for c in citations_in(fix) if c in entry["citations"]] or entry["citations"]
    elif _weak(entry) and (entry["grounding"] or coverage(entry["text"], source) >= keep_coverage):
        entry["verdict"] = "disputed"
    else:
        entry["verdict"] = "dropped"


WEAK_PROBLEMS = ("negation:", "but not with this claim")
"""Grounding problems that faithful paraphrases also show often: alone, they mark a sentence, never drop it."""


def _weak(entry: dict[str, Any]) -> bool:
    """Whether the flags may be a faithful paraphrase misjudged: the model's alone, or only weak grounding problems."""
    grounding = entry["grounding"]
    if not grounding:
        return True
    return entry["model_supported"] is not False and all(any(w in p for w in WEAK_PROBLEMS) for p in grounding)


# --- grounding: numbers, names and claims must be in the cited chunks ---------------------------
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_NUMBER_WORDS.update(
    {w: 10 * i for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)}
)
_NUMBER_WORDS.update({"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9})
_AMBIGUOUS_NUMBERS = frozenset({"zero", "one", "two", "three"})
"""Number words that alone are rarely a quoted figure: other words ("the one who", "no one") or counts a
summary infers ("two reasons", "the other three members"); they count next to another number word."""
_NEGATION = re.compile(r"\b(?:not|no|never|nothing|none|neither|nor|cannot)\b|n't\b|不|没|未|无|非", re.IGNORECASE)
_NAME = re.compile(r"[A-Z][A-Za-z]*(?:[-'’][A-Za-z]+)*|[a-z]{1,4}\d{2,}")
_NOT_NAMES = frozenset(
    [
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "OK",
        "Okay",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "Also",
        "However",
        "Then",
        "Besides",
        "Finally",
        "First",
        "Firstly",
        "Secondly",
        "Lastly",
        "Moreover",
        "Second",
        "Third",
        "Meanwhile",
        "Afterwards",
        "Overall",
        "Next",
        "So",
        "And",
        "But",
        "Or",
        "Yes",
        "No",
    ]
)


def _number_text(value: float) -> str:
    return format(value, "f").rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def numbers_in(text: str) -> set[str]:
    """The numbers a text states, normalised: ``40,000``, ``40000``, ``forty thousand`` and ``40 thousand`` alike.

    "one" and "zero" count only next to another number word ("one hundred", "twenty one").
    """
    tokens = re.findall(r"\d+(?:[.,]\d+)*|[A-Za-z]+|[^\sA-Za-z\d]", text)
    out: set[str] = set()
    total = current = 0.0
    active = digits = False

    def flush() -> None:
        nonlocal total, current, active, digits
        if active:
            out.add(_number_text(total + current))
        total = current = 0.0
        active = digits = False

    for i, token in enumerate(tokens):
        word = token.lower()
        if token[0].isdigit():
            flush()
            current = float(token.replace(",", "")) if token.count(".") <= 1 else 0.0
            active = digits = True
        elif word in _NUMBER_WORDS:
            value = _NUMBER_WORDS[word]
            if digits and value < 100:  # "40,000 two": two numbers
                flush()
            nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
            if word in _AMBIGUOUS_NUMBERS and not active and nxt not in _NUMBER_WORDS:
                continue
            if value >= 100:
                current = (current or 1) * value
                if value >= 1000:
                    total, current = total + current, 0.0
            else:
                current += value
            active = True
        elif not (word == "and" and active and not digits):
            flush()
    flush()
    return out


def names_in(text: str) -> set[str]:
    """Proper names a sentence states: runs of capitalised words (a single one only after the first word),
    and ids such as ``mn005``; possessives dropped."""
    out: set[str] = set()
    run: list[tuple[int, str]] = []

    def close() -> None:
        if run and (run[0][0] > 0 or len(run) > 1):
            out.add(" ".join(w for _, w in run))
        run.clear()

    for i, raw in enumerate(re.findall(r"\S+", text)):
        word = re.sub(r"(?:'s|’s)$", "", raw.strip("\"'“”‘’()[],.;:!?"))
        if word and _NAME.fullmatch(word) and word not in _NOT_NAMES and word.lower() not in STOPWORDS:
            run.append((i, word))
        else:
            close()
        if re.search(r"[,.;:!?)\]]$", raw):
            close()
    close()
    return out


def _has_name(name: str, text: str) -> bool:
    """``_has``, or a run of capitalised words that is two names found side by side ("Project Manager Marketing")."""
    if _has(name, text):
        return True
    words = name.split()
    return any(_has(" ".join(words[:i]), text) and _has(" ".join(words[i:]), text) for i in range(1, len(words)))


def _has(name: str, text: str) -> bool:
    """Whether ``name`` occurs in ``text``, case aside: as whole words give or take a short ending ("Designer"
    for "Design", "TV" for "TVS"), an acronym also spelt out letter by letter ("L_C_D_", "L.C.D.")."""
    stem = name[:-1] if len(name) >= 3 and name[-1] in "sS" else name
    acronym = stem.isupper() and stem.isalpha()
    pattern = r"[\W_]*".join(stem) if acronym else re.escape(stem)
    if re.search(rf"(?<![^\W_]){pattern}[^\W\d_]{{0,3}}(?![^\W_])", text, re.IGNORECASE):
        return True
    # an acronym of capitalised words the text spells out: "UI" for "User Interface"
    initials = r"[a-z]*[\s-]+".join(stem) + r"[a-z]*"
    return acronym and len(stem) > 1 and re.search(rf"\b{initials}\b", text) is not None


def grounding_problems(
    sentence: str,
    source: str,
    *,
    min_coverage: float = 0.25,
    attribution_words: int = 0,
    negation_words: int = 2,
) -> list[str]:
    """Why ``sentence`` is not grounded in ``source`` (the full text of the chunks it cites); empty when it is.

    - ``number``: a number of the sentence is nowhere in the source (``40,000`` = ``40000``; number words count);
    - ``name``: a name of the sentence is nowhere in the source; with ``attribution_words`` > 0, also a
      name in no line (a speaker's turn in a transcript) or sentence of the source that shares that many
      content words with the sentence (a claim given to the wrong person);
    - ``claim``: less than ``min_coverage`` of the sentence's content words are in the source (a claim
      about something else, e.g. another meeting);
    - ``negation``: the sentence negates, and no sentence of the source that shares ``negation_words``
      content words with it does (0: not checked).

    The defaults are set on the tuning split of ``bench.factcheck`` (``--items 0:20``) to keep false
    alarms on faithful abstractive sentences low.
    """
    problems: list[str] = []
    sentence = tidy_excerpt(sentence)
    source = "\n".join(tidy_excerpt(line) for line in source.splitlines())
    have = numbers_in(source)
    for number in sorted(numbers_in(sentence) - have):
        if "." in number and number.split(".")[0] in have:  # "12.50" said as "twelve fifty"
            continue
        problems.append(f"number {number} is not in the cited chunks")
    words = content_tokens(sentence)
    blocks = text_blocks(source) or [source]
    passages = [line for line in source.splitlines() if line.strip()] + [s for b in blocks for s in split_sentences(b)]
    for name in sorted(names_in(sentence)):
        if not _has_name(name, source):
            problems.append(f"name {name} is not in the cited chunks")
            continue
        rest = words - content_tokens(name)
        need = min(attribution_words, len(rest))
        if need and not any(_has(name, p) and len(rest & content_tokens(p)) >= need for p in passages):
            problems.append(f"name {name} is in the cited chunks but not with this claim")
    share = coverage(sentence, source)
    if share < min_coverage:
        problems.append(f"claim: {share:.0%} of its content words are in the cited chunks")
    if negation_words and _NEGATION.search(sentence):
        near = [s for b in blocks for s in split_sentences(b) if len(words & content_tokens(s)) >= negation_words]
        if not any(_NEGATION.search(s) for s in near):
            problems.append("negation: no passage of the cited chunks on this says no")
    return problems


def factcheck_stats(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts of verdicts and the share of checked sentences the checker confirmed as written."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    checked = sum(v for k, v in counts.items() if k in ("supported", "fixed", "dropped", "disputed", "unsupported"))
    flagged_by = {"model": 0, "grounding": 0, "both": 0}
    for r in results:
        by = r.get("flagged_by", [])
        for name in by:
            flagged_by[name] += 1
        flagged_by["both"] += len(by) == 2
    confirmed = counts.get("supported", 0) + counts.get("source", 0)
    total = checked + counts.get("source", 0)
    return {
        "sentences": len(results),
        "checked": checked,
        "supported": counts.get("supported", 0),
        "fixed": counts.get("fixed", 0),
        "dropped": counts.get("dropped", 0),
        "disputed": counts.get("disputed", 0),
        "unsupported": counts.get("unsupported", 0),
        "unchecked": counts.get("unchecked", 0),
        "supported_share": round(confirmed / total, 4) if total else None,
        "flagged_by": flagged_by,
    }
