from __future__ import annotations

from pathlib import Path

import pytest

from nodes.ingest import ingest
from nodes.retrieval import (
    bm25_search,
    clear_lexical_cache,
    focus_snippet,
    hybrid_search,
    lexical_index,
    rrf_fuse,
)
from stores.errors import InputError
from stores.vectorstore import Hit, get_store

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def _hit(rid: str, position: int) -> Hit:
    return Hit(id=rid, text=rid, metadata={"chunk_id": f"c{position}", "position": position})


def test_rrf_fuse_adds_reciprocal_ranks_and_records_them() -> None:
    a, b, c = _hit("d:c0", 0), _hit("d:c1", 1), _hit("d:c2", 2)
    fused = rrf_fuse([[a, b], [b, c]], k=60)
    assert [h.id for h in fused] == ["d:c1", "d:c0", "d:c2"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)
    assert fused[0].metadata["ranks"] == [2, 1] and fused[2].metadata["ranks"] == [0, 2]


def test_rrf_weights_change_the_winner() -> None:
    a, b = _hit("d:c0", 0), _hit("d:c1", 1)
    assert rrf_fuse([[a], [b]], weights=[2.0, 1.0])[0].id == "d:c0"
    assert rrf_fuse([[a], [b]], weights=[1.0, 2.0])[0].id == "d:c1"
    with pytest.raises(InputError):
        rrf_fuse([[a], [b]], weights=[1.0])


def test_hybrid_search_finds_the_chunk_with_the_rare_term() -> None:
    doc = ingest(str(FALCON))
    store = get_store()
    hits = hybrid_search(store, doc.doc_id, "Nakuru Kenya in September", 2)
    assert hits and "Nakuru" in hits[0].text
    assert hits[0].section.endswith("Schedule")
    assert hits[0].score >= hits[-1].score
    assert all(h.chunk_id.startswith("c") and h.metadata["doc_id"] == doc.doc_id for h in hits)


def test_bm25_leaves_out_chunks_without_a_shared_term() -> None:
    doc = ingest(str(FALCON))
    hits = bm25_search(get_store(), doc.doc_id, "procurement supplier", 10)
    assert hits and all(("procurement" in h.text.lower()) or ("supplier" in h.text.lower()) for h in hits)
    assert bm25_search(get_store(), doc.doc_id, "zebra quantum", 10) == []


def test_search_stays_inside_the_document() -> None:
    falcon = ingest(str(FALCON))
    other = ingest(text="Nakuru is a city in Kenya with a large lake full of flamingos.\n\nIt lies in the Rift Valley.")
    hits = hybrid_search(get_store(), falcon.doc_id, "Nakuru flamingos lake", 10)
    assert hits and {h.metadata["doc_id"] for h in hits} == {falcon.doc_id}
    assert other.doc_id != falcon.doc_id


def test_chinese_query_matches_chinese_chunk() -> None:
    text = (
        "# 项目\n\n猎鹰项目为干旱地区的小农场制造太阳能水泵。\n\n"
        "## 预算\n\n指导委员会在三月批准了四万欧元的预算。\n\n"
        "## 团队\n\n爱丽丝负责工程团队，鲍勃负责采购。\n"
    )
    doc = ingest(text=text)
    hits = hybrid_search(get_store(), doc.doc_id, "委员会批准的预算是多少？", 1)
    assert "四万欧元" in hits[0].text


def test_lexical_index_is_cached_per_document_and_rebuilt_on_new_chunking() -> None:
    clear_lexical_cache()
    doc = ingest(str(FALCON))
    store = get_store()
    first = lexical_index(store, doc.doc_id)
    assert lexical_index(store, doc.doc_id) is first
    ingest(str(FALCON), chunk_size=60, chunk_overlap=10)
    rebuilt = lexical_index(store, doc.doc_id)
    assert rebuilt is not first and len(rebuilt.hits) > len(first.hits)


def test_bad_queries() -> None:
    doc = ingest(str(FALCON))
    with pytest.raises(InputError):
        hybrid_search(get_store(), doc.doc_id, "   ", 3)
    with pytest.raises(InputError):
        hybrid_search(get_store(), doc.doc_id, "budget", 3, rerank="cross")  # type: ignore[arg-type]
    assert hybrid_search(get_store(), doc.doc_id, "budget", 0) == []
    assert hybrid_search(get_store(), "0000000000000000", "budget", 3) == []


def test_sentence_rerank_keeps_the_candidates_and_scores_them() -> None:
    doc = ingest(str(FALCON))
    plain = hybrid_search(get_store(), doc.doc_id, "self-cleaning panel coatings price", 4)
    reranked = hybrid_search(get_store(), doc.doc_id, "self-cleaning panel coatings price", 4, rerank="sentence")
    assert {h.id for h in reranked} <= {h.id for h in hybrid_search(get_store(), doc.doc_id, "x y", 20)} | {
        h.id for h in plain
    }
    assert all("rerank_score" in h.metadata for h in reranked)
    scores = [h.metadata["rerank_score"] for h in reranked]
    assert scores == sorted(scores, reverse=True)
    assert "coatings" in reranked[0].text


def test_focus_snippet_keeps_the_matching_sentences_in_order() -> None:
    text = (
        "The weather was mild. The committee approved a budget of 40,000 euros. Lunch was served at noon. "
        "Trials start in June near Nakuru. The budget keeps 6,000 euros for trials. Everyone went home."
    )
    snippet = focus_snippet(text, "What budget did the committee approve?", 30)
    assert "40,000 euros" in snippet and "6,000 euros" in snippet
    assert snippet.index("40,000") < snippet.index("6,000")
    assert "Lunch" not in snippet and "…" in snippet
    assert focus_snippet("Short text.", "anything", 50) == "Short text."
    assert focus_snippet(text, "zebra", 12).startswith("The weather was mild.")


def test_one_bm25_index_serves_chunks_and_passages() -> None:
    from stores.ranking import bm25_index, bm25_scores

    corpus = [["otter", "sleeps"], ["pump", "runs", "pump"], []]
    index = bm25_index(corpus)
    scores = bm25_scores(index, ["pump"], len(corpus))
    assert scores.shape == (3,) and scores[1] > 0 and scores[0] == scores[2] == 0
    assert not bm25_scores(index, [], 3).any()  # a query with no term scores nothing
    assert bm25_index([[], []]) is None and not bm25_scores(None, ["pump"], 2).any()
