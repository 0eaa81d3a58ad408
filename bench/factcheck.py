"""The fact-checker against planted errors: recall per kind of error and false alarms, per check.

    python -m bench.factcheck --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/factcheck.json --items 0:20

Correct sentences: the sentences of QMSum reference answers to *specific* queries, each citing the
chunks of its meeting that hold the query's ``span`` turns (at most two, those sharing most content
words with it, as the summarizer cites). Items are the specific queries, meetings from the shortest,
``--per-meeting`` of each; ``--items a:b`` slices that fixed list (tuning and held-out splits).

Each sentence is also planted with every error kind that applies, seeded (``--seed``) per sentence
and kind, citations unchanged:

- ``number``: one number replaced by another (digits or a number word);
- ``name``: one name replaced by another name of the same meeting (a speaker or a name of its
  answers; another meeting's only when it has none);
- ``negation``: the first auxiliary verb negated ("was" -> "was not") or a past-tense verb preceded
  by "never"; a sentence that already negates loses its negation;
- ``other_meeting``: the sentence replaced by a sentence of another meeting's answers.

The checker runs as the summarize workflow runs it (``nodes.summarize.fact_checker.check_sentences``, ``mark``
mode, both checks, batches of ``--batch`` sentences of one meeting, each batch holding one version of a
sentence); its entries keep the model's verdict and the grounding problems apart, so one run scores
three checkers: ``model`` (flagged when the model says unsupported), ``grounding`` (numbers, names and
content words not in the cited chunks, a claim given to the wrong speaker, a negation the source does not
make: :func:`nodes.summarize.grounding.grounding_problems`) and ``combined`` (either, as the workflow flags).
Recall = share of planted sentences flagged, per kind and overall; false alarms = share of the untouched
sentences flagged; a sentence the model gave no verdict for counts as not flagged by it
(``model_unchecked`` says how many).
``--fake`` uses the scripted model (it confirms every sentence) and the hash embedder: the pipeline
in seconds, and the grounding figures as the real run will have them.
The grounding settings are chosen on ``--items 0:10`` (tuning) and reported on ``--items 10:20``
(held out). ``--grid wide`` also scores 140 grounding settings and reports the recall / false-alarm
frontier: what any setting of the check can reach on the items run.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from doubles.replies import summarize_chat_model
from stores.documents import write_atomic

KINDS = ("number", "name", "negation", "other_meeting")
CHECKS = ("model", "grounding", "combined")
GRID: tuple[dict[str, Any], ...] = (
    {"min_coverage": 0.25, "attribution_ratio": 0.5, "negation_scope": 1, "negation_window": 2},
    {"min_coverage": 0.25, "attribution_ratio": 0.5, "negation_scope": 2, "negation_window": 2},
    {"min_coverage": 0.3, "attribution_ratio": 0.5, "negation_scope": 1, "negation_window": 2},
    {"min_coverage": 0.25, "attribution_ratio": 0.6, "negation_scope": 1, "negation_window": 2},
    {"min_coverage": 0.25, "attribution_ratio": 0.0, "negation_scope": 1, "negation_window": 2},
    {"min_coverage": 0.25, "attribution_ratio": 0.5, "negation_scope": 0, "negation_window": 2},
    {"min_coverage": 0.25, "attribution_ratio": 0.0, "negation_scope": 0, "negation_window": 2},
)
"""Grounding settings scored on the same cases (no model call): the defaults of ``grounding_problems`` (first,
chosen on ``--items 0:10``), then one change each (a stricter negation scope, claim coverage, attribution
ratio, attribution or negation off, both off): how recall trades against false alarms."""
WIDE_GRID: tuple[dict[str, Any], ...] = (
    GRID[0],
    *(
        opts
        for c in (0.2, 0.25, 0.3, 0.35)
        for a in (0.0, 0.4, 0.5, 0.6, 0.7)
        for s in (0, 1, 2)
        for w in ((1, 2, 3) if s else (2,))
        if (opts := {"min_coverage": c, "attribution_ratio": a, "negation_scope": s, "negation_window": w}) != GRID[0]
    ),
)
"""``--grid wide``: the defaults first, then every combination of claim coverage, attribution ratio and
negation scope and window (140 settings), for the recall / false-alarm frontier of the grounding check."""
_AUX = re.compile(
    r"\b(is|are|was|were|will|would|can|could|should|must|has|have|had|does|do|did|might|may)\b(?!\s+not\b)"
)
_PAST = re.compile(r"(?<=\s)([a-z]{3,}ed)\b")
_NEGATED = re.compile(r"\s*\b(?:not|never)\b|n't\b")
_NUMBER_WORD = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)\b",
    re.IGNORECASE,
)


# --- data ---------------------------------------------------------------------------------------
def load_items(path: Path, per_meeting: int = 3) -> list[dict[str, Any]]:
    """Specific queries with a span, meetings from the shortest (the fixed list ``--items`` slices)."""
    meetings = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    meetings.sort(key=lambda m: (sum(len(t["content"].split()) for t in m["transcript"]), m["id"]))
    items = []
    for meeting in meetings:
        specific = [q for q in meeting["queries"] if q["kind"] == "specific" and q.get("span")][:per_meeting]
        for i, q in enumerate(specific):
            items.append({"id": f"{meeting['id']}#s{i}", "meeting": meeting, "answer": q["answer"], "span": q["span"]})
    return items


def span_turns(meeting: dict[str, Any], span: Sequence[Sequence[int | str]]) -> list[dict[str, str]]:
    """The transcript turns of a QMSum span (inclusive index ranges)."""
    turns = meeting["transcript"]
    out = []
    for start, end in span:
        out.extend(turns[int(start) : int(end) + 1])
    return [t for t in out if t["content"].strip()]


def cite_chunks(
    sentence: str, turns: Sequence[dict[str, str]], chunks: Sequence[tuple[str, str]], k: int = 2
) -> list[Any]:
    """Ids of the (at most ``k``) chunks holding span turns that share most content words with ``sentence``."""
    from stores.text import content_words

    flat = [(cid, " ".join(text.split())) for cid, text in chunks]
    holders = []
    for turn in turns:
        head = " ".join(turn["content"].split()[:10])
        holders += [cid for cid, text in flat if head and head in text]
    words = content_words(sentence)
    ranked = sorted(
        dict.fromkeys(holders),
        key=lambda cid: (-len(words & content_words(dict(flat)[cid])), int(cid[1:])),
    )
    return ranked[:k]


def meeting_names(meeting: dict[str, Any]) -> list[str]:
    """Names of a meeting: its speakers and the names its answers state."""
    from nodes.summarize.grounding import names_in
    from stores.text import split_sentences

    names = dict.fromkeys(t["speaker"] for t in meeting["transcript"])
    for q in meeting["queries"]:
        for sentence in split_sentences(q["answer"]):
            names.update(dict.fromkeys(sorted(names_in(sentence))))
    return list(names)


# --- planting -----------------------------------------------------------------------------------
def plant(kind: str, sentence: str, rng: random.Random, names: Sequence[str], others: Sequence[str]) -> str | None:
    """``sentence`` with one error of ``kind`` planted, or None when the kind does not apply."""
    from nodes.summarize.grounding import names_in

    if kind == "number":
        digits = list(re.finditer(r"\d+(?:[.,]\d+)?", sentence))
        if digits:
            match = rng.choice(digits)
            value = float(match.group(0).replace(",", ""))
            new = value + rng.choice([1, 2, 3, 5, 10]) * (1 if value < 10 else max(1, int(value) // 10))
            text = str(int(new)) if new == int(new) else f"{new:.2f}"
            return sentence[: match.start()] + text + sentence[match.end() :]
        words = list(_NUMBER_WORD.finditer(sentence))
        if words:
            match = rng.choice(words)
            pool = [w for w in ("three", "seven", "twelve", "forty", "nine", "six") if w != match.group(0).lower()]
            return sentence[: match.start()] + rng.choice(pool) + sentence[match.end() :]
        return None
    if kind == "name":
        present = sorted(names_in(sentence))
        if not present:
            return None
        old = rng.choice(present)
        pool = [n for n in names if n not in present and n.lower() not in old.lower()]
        if not pool:
            return None
        return sentence.replace(old, rng.choice(pool), 1)
    if kind == "negation":
        if _NEGATED.search(sentence):
            return _NEGATED.sub("", sentence, count=1)
        aux = _AUX.search(sentence)
        if aux:
            return f"{sentence[: aux.end()]} not{sentence[aux.end() :]}"
        past = _PAST.search(sentence)
        if past:
            return f"{sentence[: past.start()]}never {sentence[past.start() :]}"
        return None
    if kind == "other_meeting":
        return rng.choice(others) if others else None
    raise ValueError(f"unknown kind {kind!r}")


def build_cases(
    items: Sequence[dict[str, Any]], everything: Sequence[dict[str, Any]], chunks: dict[str, list[Any]], seed: int
) -> list[dict[str, Any]]:
    """Correct sentences with their citations, and their planted versions."""
    from stores.text import content_words, split_sentences

    cases: list[dict[str, Any]] = []
    for item in items:
        meeting = item["meeting"]
        names = meeting_names(meeting)
        others = [
            s
            for other in everything
            if other["meeting"]["id"] != meeting["id"]
            for s in split_sentences(other["answer"])
            if len(content_words(s)) >= 5
        ]
        turns = span_turns(meeting, item["span"])
        for n, sentence in enumerate(split_sentences(item["answer"])):
            if len(content_words(sentence)) < 5:
                continue
            cites = cite_chunks(sentence, turns, chunks[meeting["id"]])
            if not cites:
                continue
            base = {"item": item["id"], "meeting": meeting["id"], "sentence": n, "citations": cites}
            cases.append({**base, "kind": "none", "text": sentence})
            for kind in KINDS:
                rng = random.Random(f"{seed}|{item['id']}|{n}|{kind}")
                planted = plant(kind, sentence, rng, names, others)
                if planted and planted.strip() != sentence.strip():
                    cases.append({**base, "kind": kind, "text": planted})
    return cases


# --- checking and scores ------------------------------------------------------------------------
def check_cases(
    cases: list[dict[str, Any]],
    doc_ids: dict[str, str],
    context: dict[str, Any],
    batch: int,
    grid: Sequence[dict[str, Any]] = GRID,
) -> None:
    """Run the checker on every case (in place: ``model``, ``grounding``, ``combined`` flags and problems;
    ``grid``: the grounding flag under each setting of ``grid``)."""
    from nodes.collection.sources import Sources
    from nodes.summarize.context import SummarizeContext
    from nodes.summarize.fact_checker import check_sentences
    from nodes.summarize.grounding import grounding_problems
    from stores.models import llm_for
    from stores.vectorstore import get_store

    ctx = SummarizeContext.from_mapping(context)
    store = get_store(ctx.namespace, ctx.embedder)
    llm = llm_for("checker", ctx)
    for meeting, doc_id in doc_ids.items():
        mine = [c for c in cases if c["meeting"] == meeting]
        for kind in ("none", *KINDS):  # one version of a sentence per batch
            group = [c for c in mine if c["kind"] == kind]
            for start in range(0, len(group), batch):
                part = group[start : start + batch]
                sentences = [{"text": c["text"], "citations": c["citations"]} for c in part]
                checked = check_sentences(
                    sentences, sources=Sources(store, [doc_id]), llm=llm, mode="mark", checks="both", batch_size=batch
                )
                cited = dict.fromkeys(c for p in part for c in p["citations"])
                sources = {h.chunk_id: h.text for h in store.chunks(doc_id, list(cited))}
                for case, entry in zip(part, checked, strict=True):
                    case["model"] = entry["model_supported"] is False
                    case["model_unchecked"] = entry["model_supported"] is None
                    case["grounding"] = bool(entry["grounding"])
                    case["combined"] = case["model"] or case["grounding"]
                    case["problems"] = entry["grounding"]
                    source = " ".join(sources.get(c, "") for c in case["citations"])
                    case["grid"] = [bool(grounding_problems(case["text"], source, **opts)) for opts in grid]
        print(f"checked {len(mine)} sentences of {meeting}", file=sys.stderr, flush=True)


def scores(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per check: recall per kind and overall on planted sentences, false alarms on the untouched ones."""
    clean = [c for c in cases if c["kind"] == "none"]
    planted = [c for c in cases if c["kind"] != "none"]
    out: dict[str, Any] = {
        "sentences": len(clean),
        "planted": {k: sum(c["kind"] == k for c in planted) for k in KINDS},
        "model_unchecked": sum(c.get("model_unchecked", False) for c in cases),
    }
    for check in CHECKS:
        per_kind = {}
        for kind in KINDS:
            mine = [c for c in planted if c["kind"] == kind]
            per_kind[kind] = round(sum(c[check] for c in mine) / len(mine), 3) if mine else None
        out[check] = {
            "recall": round(sum(c[check] for c in planted) / len(planted), 3) if planted else None,
            "recall_by_kind": per_kind,
            "false_alarms": round(sum(c[check] for c in clean) / len(clean), 3) if clean else None,
        }
    return out


def grid_scores(cases: Sequence[dict[str, Any]], grid: Sequence[dict[str, Any]] = GRID) -> list[dict[str, Any]]:
    """Grounding alone and combined with the model, for each setting of ``grid`` (the one ``check_cases`` used)."""
    out = []
    for i, opts in enumerate(grid):
        view = [{**c, "grounding": c["grid"][i], "combined": c["model"] or c["grid"][i]} for c in cases if "grid" in c]
        figures = scores(view)
        out.append({"settings": opts, "grounding": figures["grounding"], "combined": figures["combined"]})
    return out


def frontier(results: Sequence[dict[str, Any]], check: str = "grounding") -> list[dict[str, Any]]:
    """The settings of ``grid_scores`` results that no other beats on both recall and false alarms (by ``check``),
    from the fewest false alarms up."""
    points = [(r[check]["false_alarms"] or 0.0, r[check]["recall"] or 0.0, r["settings"]) for r in results]
    out: list[dict[str, Any]] = []
    for alarms, recall, settings in sorted(points, key=lambda p: (p[0], -p[1])):
        if not out or recall > out[-1]["recall"]:
            out.append({"settings": settings, "recall": recall, "false_alarms": alarms})
    return out


def markdown_table(figures: dict[str, Any]) -> str:
    """Recall per kind, overall, and false alarms per check (what the README shows)."""
    head = "| check | " + " | ".join(f"{k} ({figures['planted'][k]})" for k in KINDS) + " | recall | false alarms |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for check in CHECKS:
        f = figures[check]
        kinds = " | ".join("n/a" if f["recall_by_kind"][k] is None else f"{f['recall_by_kind'][k]:.2f}" for k in KINDS)
        lines.append(
            f"| {check} | {kinds} | {f['recall'] or 0:.2f} | {f['false_alarms'] or 0:.2f} ({figures['sentences']}) |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the cases, check them, score them."""
    from bench.summarize import item_range, model_label, transcript_text
    from nodes.ingest import ingest
    from stores.models import use_chat_model
    from stores.vectorstore import get_store

    everything = load_items(Path(args.data), args.per_meeting)
    items = everything[item_range(args.items)]
    if not items:
        raise SystemExit(f"no items {args.items} among the {len(everything)} specific queries of {args.data}")
    doc_ids: dict[str, str] = {}
    chunks: dict[str, list[Any]] = {}
    store = get_store(args.namespace, args.embedder)
    for item in items:
        meeting = item["meeting"]
        if meeting["id"] not in doc_ids:
            text = transcript_text(meeting)
            doc_id = ingest(text=text, namespace=args.namespace, title=meeting["id"], embedder=args.embedder).doc_id
            doc_ids[meeting["id"]] = doc_id
            chunks[meeting["id"]] = [(h.chunk_id, h.text) for h in store.by_doc(doc_id)]
    cases = build_cases(items, everything, chunks, args.seed)
    context = {"namespace": args.namespace, "embedder": args.embedder, "llm_cache": not args.fake}
    grid = WIDE_GRID if args.grid == "wide" else GRID
    with use_chat_model(summarize_chat_model()) if args.fake else nullcontext():
        check_cases(cases, doc_ids, context, args.batch, grid)
    figures = scores(cases)
    results = grid_scores(cases, grid)
    extra: dict[str, Any] = {}
    if args.grid == "wide":  # 140 flags per case: the scores and their frontier, not the flags
        extra = {"grounding_frontier": frontier(results), "combined_frontier": frontier(results, "combined")}
        for case in cases:
            case.pop("grid", None)
    return {
        "figures": figures,
        "table": markdown_table(figures),
        "grounding_grid": results,
        **extra,
        "config": {
            "data": str(args.data),
            "items": args.items,
            "item_ids": [i["id"] for i in items],
            "seed": args.seed,
            "batch": args.batch,
            "grid": args.grid,
            "model": model_label(args.fake),
            "embedder": args.embedder,
        },
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    from bench.summarize import add_common_arguments, parse_arguments

    parser = argparse.ArgumentParser(prog="python -m bench.factcheck", description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--per-meeting", type=int, default=3, help="specific queries taken per meeting (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planted errors (default 0)")
    parser.add_argument("--batch", type=int, default=6, help="sentences per checker call (default 6, as shipped)")
    parser.add_argument(
        "--grid",
        choices=("fixed", "wide"),
        default="fixed",
        help="grounding settings also scored: the defaults and one change each (fixed), or 140 (wide: the frontier)",
    )
    args = parse_arguments(parser, argv)
    report = run(args)
    write_atomic(Path(args.out), json.dumps(report, ensure_ascii=False, indent=1))
    print(report["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
