"""The grounding check: a sentence's numbers, names and claims must be in the chunks it cites.

It needs no model: every number and name of a sentence, and a share of its content words (compared by
stem), must be in the full text of the chunks it cites. In a transcript, a claim given to a speaker must
be in that speaker's turns rather than another's, and a negation must be on the same words in the source.
"""

from __future__ import annotations

import re
from collections import Counter

from nodes.summarize.sentences import content_tokens, text_blocks, tidy_excerpt
from stores.cache import lru_cache
from stores.text import STOPWORDS, lexical_tokens, split_sentences
from stores.text import porter_stem as _stem

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
summary infers ("two reasons", "the other three members"); they count next to another number word or
before a hyphen ("a three-point scale")."""
_NEGATION = re.compile(r"\b(?:not|no|never|nothing|none|neither|nor|cannot)\b|n't\b|不|没|未|无|非", re.IGNORECASE)
_SAYS_NO = re.compile(
    _NEGATION.pattern + r"|\b(?:without|hardly|barely|against|instead|rather than|lack\w*|refus\w*|reject\w*|avoid\w*"
    r"|disagree\w*|dislike\w*|doubt\w*)\b",
    re.IGNORECASE,
)
"""A source's ways to say no: a negation, or a word that denies what follows it ("without a screen",
"rejected the idea"): a summary writes them as "not"."""
_NOT_A_DENIAL = re.compile(r"(?:not|n't)\s+(?:only|just|merely|to mention)\b|no\s+(?:doubt|matter)\b", re.IGNORECASE)
"""Negation words that deny nothing: "not only ... but also", "no doubt"."""
_NEGATIVE_PREFIXES = ("un", "dis", "non")


def _prefixed(word: str, prefix: str) -> bool:
    """Whether ``word`` is a negative-prefixed word ("unnecessary", "disagree", "non-functional")."""
    return word.startswith(prefix) and len(word) - len(prefix) >= 4


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


_SPEAKER = re.compile(r"(?:^|(?<=[.?!] ))([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,3}):[ \t]", re.MULTILINE)
_REPORT = re.compile(
    r"(?:[A-Z]\w*,\s+)?(?:The\s+)?([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,3}?)(?:'s|’s)?\s+"
    r"(?:(?:also|then|further|later|again|first|finally|initially|still)\s+)?([a-z]+)\b"
)
_REPORTING_TEXT = (
    "said says thought thinks felt feels told wrote knew suggested believed agreed disagreed proposed "
    "explained wanted added concluded indicated asked mentioned pointed noted stated claimed argued "
    "recommended insisted decided preferred liked reported presented introduced described emphasized "
    "stressed hoped expected considered questioned answered replied responded admitted confirmed"
)


@lru_cache(maxsize=1)
def _reporting_verbs() -> frozenset[str]:
    """Stems of the verbs that report what someone said or thought: their subject, in a transcript, is a speaker."""
    return frozenset(_stem(w) for w in _REPORTING_TEXT.split())


_NOT_SCOPE = STOPWORDS | {"many", "much", "more", "less", "enough", "quite", "really", "only", "just", "even"}
"""Words a negation passes over to reach what it negates: function words, degree, quantity ("not as many buttons")."""


def _number_text(value: float) -> str:
    return format(value, "f").rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def numbers_in(text: str) -> set[str]:
    """The numbers a text states, normalised: ``40,000``, ``40000``, ``forty thousand`` and ``40 thousand`` alike.

    "zero" to "three" count only next to another number word ("one hundred", "twenty one") or in a compound
    ("a three-point scale").
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
            if word in _AMBIGUOUS_NUMBERS and not active and nxt not in _NUMBER_WORDS and nxt != "-":
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
    """Proper names a sentence states: runs of capitalised words, and ids such as ``mn005``.

    A single capitalised word counts only after the first word; possessives are dropped.
    """
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
    """Whether ``name`` occurs in ``text``, case aside.

    As whole words give or take a short ending ("Designer" for "Design", "TV" for "TVS"); an acronym also spelt
    out letter by letter ("L_C_D_", "L.C.D.").
    """
    stem = name[:-1] if len(name) >= 3 and name[-1] in "sS" else name
    acronym = stem.isupper() and stem.isalpha()
    pattern = r"[\W_]*".join(stem) if acronym else re.escape(stem)
    if re.search(rf"(?<![^\W_]){pattern}[^\W\d_]{{0,3}}(?![^\W_])", text, re.IGNORECASE):
        return True
    # an acronym of capitalised words the text spells out: "UI" for "User Interface"
    initials = r"[a-z]*[\s-]+".join(stem) + r"[a-z]*"
    return acronym and len(stem) > 1 and re.search(rf"\b{initials}\b", text) is not None


def stems(text: str) -> set[str]:
    """Stems of a text's content words: a paraphrase ("recognizable", "recognize") shares them with its source."""
    return {_stem(w) for w in content_tokens(text)}


def speaker_turns(source: str) -> dict[str, set[str]]:
    """The stems each speaker of a transcript says (``Name: words`` turns); empty unless two speakers or more."""
    said: dict[str, list[str]] = {}
    labels = list(_SPEAKER.finditer(source))
    ends = [label.start() for label in labels[1:]] + [len(source)]
    for label, end in zip(labels, ends[: len(labels)], strict=True):
        said.setdefault(label.group(1), []).append(source[label.end() : end])
    return {name: stems(" ".join(turns)) for name, turns in said.items()} if len(said) > 1 else {}


def _speaks_as(name: str, turns: dict[str, set[str]]) -> list[str]:
    """The speakers ``name`` stands for.

    The same words give or take a short ending, or their first letters; or two speakers side by side.
    """
    words = name.lower().split()

    def prefixes(speaker: str) -> bool:
        said = speaker.lower().split()
        return len(words) == len(said) and all(t.startswith(w) for w, t in zip(words, said, strict=True))

    found = [s for s in turns if _has(name, s) or prefixes(s)]
    if found:
        return found
    parts = name.split()  # two speakers side by side: "Project Manager Marketing"
    for i in range(1, len(parts)):
        first, second = _speaks_as(" ".join(parts[:i]), turns), _speaks_as(" ".join(parts[i:]), turns)
        if first and second:
            return first + second
    return []


def reporting_subject(sentence: str, source: str) -> str:
    """The name that opens a report ("Industrial Designer also suggested ..."), or "".

    A single capitalised word counts only when it is all capitals or ``source`` never writes it in lower case
    ("Users said" is no name).
    """
    match = _REPORT.match(sentence)
    if not match or _stem(match.group(2).lower()) not in _reporting_verbs():
        return ""
    words = match.group(1).split()
    while words and (words[0] in _NOT_NAMES or words[0].lower() in STOPWORDS):  # "But Marketing said"
        words.pop(0)
    if not words:
        return ""
    subject = " ".join(words)
    if " " in subject or subject.isupper() or not re.search(rf"\b{re.escape(subject.lower())}\b", source):
        return subject
    return ""


def _attribution(sentence: str, names: set[str], turns: dict[str, set[str]], min_ratio: float) -> str:
    """The name of a speaker the sentence gives a claim to that another speaker of ``turns`` made, or "".

    A word of the claim weighs 1 / (speakers who say it); the named speakers' best score must be at least
    ``min_ratio`` of the best speaker's, when that reaches 1 (a word only one speaker says, or as much).
    """
    named = {name: _speaks_as(name, turns) for name in sorted(names)}
    named = {name: labels for name, labels in named.items() if labels}
    if not named:
        return ""
    claim = stems(sentence) - {w for name in names for w in stems(name)}
    saying = Counter(w for said in turns.values() for w in said & claim)
    score = {s: sum(1 / saying[w] for w in said & claim) for s, said in turns.items()}
    best = max(score.values())
    mine = max(score[s] for labels in named.values() for s in labels)
    return next(iter(named)) if best >= 1 and mine < min_ratio * best else ""


def _negated(
    text: str, width: int, known: set[str] | None = None, cues: re.Pattern[str] = _NEGATION
) -> list[list[str]]:
    """For each negation of ``text`` (a match of ``cues``), the stems of the content words after it in its clause.

    At most ``width`` words; only those in ``known`` when given.
    """
    out = []
    for match in cues.finditer(text):
        if _NOT_A_DENIAL.match(text, match.start()):
            continue
        clause = re.split(r"[,.;:!?]", text[match.end() :], maxsplit=1)[0]
        words = [_stem(w) for w in lexical_tokens(clause) if w not in _NOT_SCOPE and w.isalpha()]
        out.append([w for w in words if known is None or w in known][:width])
    return out


def grounding_problems(
    sentence: str,
    source: str,
    *,
    min_coverage: float = 0.25,
    attribution_words: int = 0,
    attribution_ratio: float = 0.5,
    negation_scope: int = 1,
    negation_window: int = 2,
) -> list[str]:
    """Why ``sentence`` is not grounded in ``source`` (the full text of the chunks it cites); empty when it is.

    Words are compared by stem (:func:`stems`), so a faithful paraphrase keeps its words.

    - ``number``: a number of the sentence is nowhere in the source (``40,000`` = ``40000``; number words count);
    - ``name``: a name of the sentence is nowhere in the source; in a transcript (``Name: words`` turns), also
      the subject of a report ("X suggested") that is no speaker of the source, and, with
      ``attribution_ratio`` > 0, a claim given to speakers whose turns hold less than that share of the
      words of the claim that the best speaker's turns hold (:func:`_attribution`); with
      ``attribution_words`` > 0, a name in no line or sentence of the source that shares that many content
      words with the sentence;
    - ``claim``: less than ``min_coverage`` of the content words of the sentence, names aside, are in the
      source (a claim about something else, e.g. another meeting);
    - ``negation``: a negation of the sentence whose first ``negation_scope`` negated content words that the
      source has (0: not checked) the source never negates: none of them within ``negation_window`` content
      words after a negation of the source, or as an "un-" word.

    The defaults are set on the tuning split of ``bench.factcheck`` (``--items 0:10``) to keep false
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
    turns = speaker_turns(source)
    names = names_in(sentence)
    subject = reporting_subject(sentence, source)
    absent = subject in names and not _has_name(subject, source)  # reported below as not in the chunks
    if subject and turns and not absent and not _speaks_as(subject, turns):
        problems.append(f"name {subject} is no speaker of the cited chunks")
    for name in sorted(names):
        if not (_has_name(name, source) or _speaks_as(name, turns)):
            problems.append(f"name {name} is not in the cited chunks")
            continue
        rest = words - content_tokens(name)
        need = min(attribution_words, len(rest))
        if need and not any(_has(name, p) and len(rest & content_tokens(p)) >= need for p in passages):
            problems.append(f"name {name} is in the cited chunks but not with this claim")
    if attribution_ratio and turns:
        wrong = _attribution(sentence, names | ({subject} if subject else set()), turns, attribution_ratio)
        if wrong:
            problems.append(f"name {wrong} is in the cited chunks but not with this claim: another speaker says it")
    claim = stems(sentence) - {w for name in names for w in stems(name)}
    share = len(claim & stems(source)) / len(claim) if claim else 1.0
    if share < min_coverage:
        problems.append(f"claim: {share:.0%} of its content words are in the cited chunks")
    if negation_scope:
        said_no = {_stem(w[len(p) :]) for w in lexical_tokens(source) for p in _NEGATIVE_PREFIXES if _prefixed(w, p)}
        said_no.update(w for scope in _negated(source, negation_window, cues=_SAYS_NO) for w in scope)
        if any(scope and not set(scope) & said_no for scope in _negated(sentence, negation_scope, stems(source))):
            problems.append("negation: no passage of the cited chunks on this says no")
    return problems
