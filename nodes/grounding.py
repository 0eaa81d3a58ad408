"""The grounding check: a sentence's numbers, names and claims must be in the chunks it cites.

It needs no model: every number and name of a sentence, and a share of its content words, must be
in the full text of the chunks it cites, and a negation in a cited passage on the same thing.
"""

from __future__ import annotations

import re

from nodes.sentences import content_tokens, coverage, text_blocks, tidy_excerpt
from stores.text import STOPWORDS, split_sentences

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
