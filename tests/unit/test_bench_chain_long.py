from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.chain import main as bench_main
from bench.chain_long import (
    METHODS,
    ORDERINGS,
    SentenceMap,
    answer_policy,
    as_text,
    curve_pairs,
    evidence_recall,
    ordering_recall,
    pad_document,
    paired,
    passage_recall,
    run_long,
    summarise,
    supporting_chunks,
)
from bench.qa_data import Paragraph, QAItem
from doubles.chat import ScriptedChatModel
from stores.models import use_chat_model
from tests.fakes import quoting


def item(n: int, words: int = 30) -> QAItem:
    filler = " ".join(f"w{n}x{i}" for i in range(words))
    return QAItem(
        id=f"q{n}",
        source="test",
        question=f"Which river flows through city {n}?",
        answers=[f"River{n}"],
        paragraphs=[
            Paragraph(f"City {n}", f"City {n} lies on River{n}. {filler}", True),
            Paragraph(f"Other {n}", f"Nothing here {n}. {filler}", False),
            Paragraph(f"More {n}", f"Still nothing {n}. {filler}", False),
        ],
    )


POOL = [item(n) for n in range(6)]


def test_pad_and_cut_documents() -> None:
    base = POOL[0]
    longer = pad_document(base, POOL, 400)
    assert sum(len(p.chunk_text.split()) for p in longer) >= 400
    assert [p for p in longer if p.supporting] == [p for p in base.paragraphs if p.supporting]
    assert all(p in longer for p in base.paragraphs)
    assert not any(p.supporting for p in longer if p not in base.paragraphs)
    assert pad_document(base, POOL, 400) == longer  # seeded
    shorter = pad_document(base, POOL, 40)
    assert shorter[0].supporting and len(shorter) < len(base.paragraphs)


def test_supporting_chunks_and_recall() -> None:
    paras = POOL[1].paragraphs
    chunks = [("c0", as_text(paras[:1])), ("c1", as_text(paras[1:]))]
    gold = supporting_chunks(paras, chunks)
    assert gold == [["c0"]]
    assert evidence_recall(gold, ["c1"]) == 0.0 and evidence_recall(gold, ["c1", "c0"]) == 1.0
    assert evidence_recall([[]], ["c0"]) is None


def scripted(answer_with: str = "") -> ScriptedChatModel:
    worker = quoting([("River", "")], otherwise="river")

    def answer(messages: list) -> str:
        text = " ".join(str(m.content) for m in messages)
        found = [w.rstrip(".,") for w in text.split() if w.startswith("River")]
        said = answer_with or (found[0] if found else "unknown")
        return json.dumps({"answer": said, "evidence": [], "explanation": ""})

    return ScriptedChatModel(
        rules=[("manager of a chain", answer), ("Answer the question using only", answer)], default=worker
    )


def test_run_long_scores_and_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_EMBEDDER", "hash")
    journal = tmp_path / "journal.jsonl"
    model = scripted()
    with use_chat_model(model):
        rows = run_long(POOL[:2], POOL, journal, METHODS, budget=2000, embedder="hash")
    assert len(rows) == 2 * len(METHODS)
    summary = summarise(rows)
    assert set(summary) == set(METHODS)
    for method, figures in summary.items():
        assert figures["items"] == 2 and figures["f1"] == 1.0, method
        assert figures["evidence_recall"] == 1.0 and figures["tokens"] > 0
    assert summary["topk"]["calls"] == 1
    assert summary["chow-liu-bfs"]["share_read"] == 1.0
    calls = len(model.calls)
    with use_chat_model(model):
        again = run_long(POOL[:2], POOL, journal, METHODS, budget=2000, embedder="hash")
    assert again == rows and len(model.calls) == calls  # replayed from the journal
    assert len(paired([*rows, {**rows[0], "item": "lonely", "method": "anytime"}], ["anytime", "topk"])) == 4


def test_bench_long_part_writes_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name, items in (("a_long", POOL[:3]), ("b_long", POOL[3:])):
        lines = [
            json.dumps(
                {
                    "id": i.id,
                    "source": i.source,
                    "question": i.question,
                    "answers": i.answers,
                    "paragraphs": [p.__dict__ for p in i.paragraphs],
                }
            )
            for i in items
        ]
        (data / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "results" / "long.json"
    with use_chat_model(scripted()):
        report = bench_main(
            [
                "--data",
                str(data),
                "--out",
                str(out),
                "--parts",
                "long",
                "--embedder",
                "hash",
                "--methods",
                "anytime,topk",
                "--long-split",
                "0:1",
                "--sizes",
                "300",
            ]
        )
    assert report["long"]["anytime"]["items"] == 2 and report["long"]["topk"]["items"] == 2
    assert set(report["long_curve"]) == {"orig", "300"}
    assert {size: f["anytime"]["items"] for size, f in report["long_curve_paired"].items()} == {"orig": 2, "300": 2}
    assert json.loads(out.read_text())["long_notes"]["split"] == "0:1"

    # the manager re-asked on the journalled quotes: an unchanged manager gives the chain's answers from the cache
    from bench import chain_manager
    from bench.chain_long import setup_version

    args = ["--data", str(data), "--journal", str(out.parent / "chain_long_journal.jsonl"), "--embedder", "hash"]
    args += ["--setup", setup_version("anytime"), "--split", "0:1", "--out", str(tmp_path / "manager.json")]
    model = scripted()
    with use_chat_model(model):
        replayed = chain_manager.main(args)["answers"]
    assert set(replayed) == {"journalled", "re-asked"} and model.calls == []
    assert all(replayed[k]["items"] == 2 and replayed[k]["f1"] == 1.0 for k in replayed)
    assert replayed["re-asked"]["manager_input_tokens"] > 0
    # a changed manager is asked afresh, on the same quotes, and its answers are journalled
    import prompts

    render = prompts.render  # a changed manager prompt: one more space
    monkeypatch.setattr(prompts, "render", lambda n, *a, **k: render(n, *a, **k) + " " * (n == "chain/manager"))
    monkeypatch.setattr(chain_manager, "manager_setup", lambda: "changed")
    with use_chat_model(scripted(answer_with="unknown")):
        changed = chain_manager.main(args)["answers"]
    assert changed["re-asked"]["f1"] == 0.0 and changed["journalled"]["f1"] == 1.0
    with use_chat_model(model):
        assert chain_manager.main(args)["answers"] == changed and model.calls == []  # read back from its journal
    # the quotes laid out hop first are journalled apart from the same manager's answers on them as they were
    with use_chat_model(scripted(answer_with="unknown")):
        hop_first = chain_manager.main([*args, "--bridges", "always"])
    assert hop_first["notes"]["bridges"] == "always" and hop_first["answers"]["re-asked"]["items"] == 2
    # and so is another manager prompt, given as a file
    other = tmp_path / "manager.txt"
    other.write_text("You are the manager of a chain of readers. Answer in one word, in JSON. $reconcile", "utf-8")
    asked = scripted(answer_with="unknown")
    with use_chat_model(asked):
        with_prompt = chain_manager.main([*args, "--manager-prompt", str(other)])
    assert with_prompt["notes"]["manager_prompt"] == str(other)
    assert len(asked.calls) == 2 and all("Answer in one word, in JSON." in str(call[0].content) for call in asked.calls)
    keys = [json.loads(line)["key"] for line in (tmp_path / "manager_journal.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8
    with pytest.raises(SystemExit, match="unknown methods"):
        bench_main(["--data", str(data), "--out", str(out), "--parts", "long", "--methods", "magic"])


def test_ordering_recall_without_a_model() -> None:
    figures = ordering_recall(POOL[:3], ks=(1, 3), embedder="hash")
    assert figures["items"] == 3
    assert set(figures) >= {"items", *ORDERINGS} and "best-first[0.5,1.0]" in figures
    for name in ORDERINGS:
        assert 0.0 <= figures[name]["recall@1"] <= figures[name]["recall@3"] <= 1.0
    # every document fits in three chunks or fewer here: any order has read the evidence by then
    assert all(figures[name]["recall@3"] == 1.0 for name in ORDERINGS)


def test_a_changed_setup_is_run_afresh_and_old_keys_read_as_the_legacy_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import chain_long

    monkeypatch.setenv("LONGDOC_EMBEDDER", "hash")
    journal = tmp_path / "journal.jsonl"
    model = scripted()
    with use_chat_model(model):
        run_long(POOL[:1], POOL, journal, ["anytime"], budget=2000, embedder="hash")
        calls = len(model.calls)
        assert calls > 0
        monkeypatch.setattr(chain_long, "setup_version", lambda method, collection=(): "changed")
        rows = run_long(POOL[:1], POOL, journal, ["anytime"], budget=2000, embedder="hash")
    # run again (its replies come from the response cache) and journalled under the new key
    assert rows[0]["key"].endswith("|changed") and len(journal.read_text(encoding="utf-8").splitlines()) == 2
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text(json.dumps({"key": "q0|orig|3000|topk", "method": "topk"}) + "\n", encoding="utf-8")
    assert list(chain_long.read_journal(legacy)) == [f"q0|orig|3000|topk|{chain_long.LEGACY_SETUPS['topk']}"]
    same = tmp_path / "same.jsonl"
    same.write_text(json.dumps({"key": "q0|orig|3000|anytime|c639f9a3", "method": "anytime"}) + "\n", encoding="utf-8")
    assert list(chain_long.read_journal(same)) == ["q0|orig|3000|anytime|34754e97"]  # a setup it equals


def test_the_setup_version_follows_the_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import chain_long

    assert chain_long.setup_version("anytime") == chain_long.setup_version("chow-liu-bfs")
    assert chain_long.setup_version("anytime") != chain_long.setup_version("topk")


def test_bench_evidence_counts_the_sentences_a_run_read() -> None:
    paragraphs = [Paragraph("A", "Alpha is one. Beta is two.", True), Paragraph("B", "Gamma is three.", False)]
    chunks = [("c0", "A: Alpha is one. Beta is two.\n\nB: Gamma is three.")]
    sentences = SentenceMap(chunks)
    assert sentences.recall(paragraphs, {"passages": ["c0.1-2"]}) == 1.0
    assert sentences.recall(paragraphs, {"passages": ["c0.3-3"]}) == 0.0
    assert sentences.recall(paragraphs, {"passages": None, "read": ["c0"]}) == 1.0  # a whole chunk read
    assert sentences.recall([paragraphs[1]], {"passages": []}) is None


def test_the_text_a_run_was_shown_counts_its_passages_not_its_chunks() -> None:
    from bench.chain_long import _per_worker_call
    from stores.text import count_tokens

    chunks = [("c0", "A: Alpha is one. Beta is two.\n\nB: Gamma is three and more words follow here.")]
    sentences = SentenceMap(chunks)
    one = sentences.text_tokens({"passages": ["c0.3-3"], "read": ["c0"], "read_tokens": 99})
    assert one == count_tokens("B: Gamma is three and more words follow here.")
    assert sentences.text_tokens({"passages": None, "read": ["c0"], "read_tokens": 99}) == 99
    usage = {"worker": {"calls": 2, "input": 300}}
    rows = [{"usage": usage, "read_tokens": 99, "text_tokens": one}]
    assert _per_worker_call(rows)["worker_overhead_per_call"] == (300 - one) / 2
    assert _per_worker_call([{"usage": usage, "read_tokens": 99}])["worker_overhead_per_call"] == (300 - 99) / 2


def test_answer_policy_reports_both_sides() -> None:
    rows = [
        {"prediction": "Paris", "answers": ["Paris"], "evidence": 1.0, "inferred": False, "dropped": 1},
        {"prediction": "Lyon", "answers": ["Paris"], "evidence": 0.5, "inferred": True, "dropped": 0},
        {"prediction": "unknown", "answers": ["Paris"], "evidence": 1.0, "dropped": 0},
        {"prediction": "unknown", "answers": ["Paris"], "evidence": 0.0, "dropped": 2},
    ]
    policy = answer_policy(rows)
    assert policy["answered"] == 0.5 and policy["f1_answered"] == 0.5
    assert policy["unknown_with_evidence"] == 0.5 and policy["inferred"] == 1 and policy["dropped_quotes"] == 3


def test_passage_recall_reaches_more_evidence_than_whole_chunks_in_one_budget() -> None:
    filler = [Paragraph(f"Filler {i}", " ".join(f"f{i}w{j}" for j in range(120)) + ".", False) for i in range(12)]
    gold = [
        Paragraph("Lyon", "Lyon lies on the Rhone river in France.", True),
        Paragraph("Rhone", "The Rhone river rises in the Alps of Switzerland.", True),
    ]
    paragraphs = [filler[0], gold[0], *filler[1:7], gold[1], *filler[7:]]
    item = QAItem(
        id="x", source="t", question="Where does the river of Lyon rise?", answers=["Alps"], paragraphs=paragraphs
    )
    result = passage_recall([item], budget=200, embedder="hash", sizes=(60,))
    assert result["items"] == 1 and result["passages-60"] == 1.0 and result["chunks"] < 1.0


def test_the_cost_curve_pairs_the_questions_run_at_every_length() -> None:
    def row(item: str, method: str, **extra: Any) -> dict[str, Any]:
        return {"item": item, "method": method, **extra}

    by_size = {
        "orig": [row("a", "anytime"), row("b", "anytime"), row("a", "topk")],
        "40000": [row("a", "anytime"), row("c", "anytime")],
    }
    paired_rows = curve_pairs(by_size)
    assert {size: [(r["item"], r["method"]) for r in rows] for size, rows in paired_rows.items()} == {
        "orig": [("a", "anytime")],
        "40000": [("a", "anytime")],
    }
    assert curve_pairs({"orig": by_size["orig"]}) == {}


def test_a_passage_run_without_its_shown_text_is_left_out_of_the_per_call_overhead() -> None:
    usage = {"worker": {"input": 2000, "output": 50, "calls": 2}}
    base = {"method": "anytime", "prediction": "x", "answers": ["x"], "tokens": 2050, "calls": 2, "read": ["c1"]}
    base |= {"chunks": 4, "recall": 1.0, "words": 100, "stopped": "budget", "usage": usage, "seconds": 1.0}
    counted = {**base, "item": "a", "passages": ["c1.1-3"], "text_tokens": 1500, "read_tokens": 9000}
    padded = {**base, "item": "b", "passages": ["c1.1-3"], "read_tokens": 9000}  # shown text not counted
    whole = {**base, "item": "c", "passages": None, "read_tokens": 1800}  # read whole chunks
    figures = summarise([counted, padded, whole])["anytime"]
    assert figures["worker_overhead_per_call"] == (2000 - 1500 + 2000 - 1800) / 4


LEVERS = ("anytime", "anytime-worker05", "anytime-draft", "anytime-worker05-draft", "anytime-reuse")


def test_each_model_lever_runs_under_its_own_settings_and_keys_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import chain_long, collection
    from stores.settings import SMALL_MODEL_NAME, get_settings

    for name in ("LONGDOC_WORKER_MODEL", "LONGDOC_MANAGER_MODEL", "LONGDOC_DRAFT_MODEL", "LONGDOC_CACHE_REUSE"):
        monkeypatch.delenv(name, raising=False)
    seen: dict[str, tuple[str, str | None, int]] = {}

    def planned(inputs: dict[str, Any], context: Any) -> tuple[dict[str, Any], float]:
        settings = get_settings()
        seen[inputs["question"]] = (context.worker_model, settings.draft_model, settings.cache_reuse)
        fields = ("read", "passages", "skipped", "notes", "quotes", "inferred", "dropped")
        return {"answer": "a", "usage": {}, "stopped": "budget", **{name: [] for name in fields}}, 0.0

    monkeypatch.setattr(collection, "planned_run", planned)
    for method in LEVERS:
        assert chain_long.run_one(method, "doc", method, 2000, "hash")[0] == "a"
    assert seen == {
        "anytime": ("", None, 0),
        "anytime-worker05": (SMALL_MODEL_NAME, None, 0),
        "anytime-draft": ("", SMALL_MODEL_NAME, 0),
        "anytime-worker05-draft": (SMALL_MODEL_NAME, SMALL_MODEL_NAME, 0),
        "anytime-reuse": ("", None, 256),
    }
    assert get_settings().draft_model is None and get_settings().cache_reuse == 0  # set around the run only
    versions = {method: chain_long.setup_version(method) for method in LEVERS}
    assert len(set(versions.values())) == len(LEVERS)  # a lever's rows are never read as another's
    assert chain_long.model_setup("anytime") == {}
    assert chain_long.model_setup("anytime-worker05-draft") == {
        "worker_model": SMALL_MODEL_NAME,
        "draft": [SMALL_MODEL_NAME, 8],
    }
    monkeypatch.setenv("LONGDOC_DRAFT_TOKENS", "4")
    assert chain_long.setup_version("anytime-draft") != versions["anytime-draft"]
    monkeypatch.setenv("LONGDOC_WORKER_MODEL", SMALL_MODEL_NAME)  # set for the whole sitting: anytime's rows too
    assert chain_long.setup_version("anytime") == versions["anytime-worker05"]
