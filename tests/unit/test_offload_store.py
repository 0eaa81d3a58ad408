"""The offload store interface, on both backends: put / get / list / search / delete by session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stores.errors import InputError
from stores.offload import (
    ChromaOffloadStore,
    MemoryOffloadStore,
    OffloadItem,
    OffloadStore,
    check_session,
    get_offload_store,
    is_offload_id,
    reset_memory_stores,
)
from stores.vectorstore import get_store, reset_stores


@pytest.fixture(params=["chroma", "memory"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    reset_memory_stores()
    yield request.param
    reset_memory_stores()


def item(turn: int, text: str, session: str = "s1", suffix: str = "", summary: str = "") -> OffloadItem:
    role = "output" if suffix else "exchange"
    return OffloadItem(
        id=f"o{turn}{suffix}", session=session, doc_id="doc1", turn=turn, role=role, text=text, summary=summary
    )


def test_put_get_list_delete(backend: str) -> None:
    store: OffloadStore = get_offload_store("ns1", backend=backend)
    store.put(item(2, "Q: budget? A: 40,000 euros.", summary="budget is 40,000 euros"))
    store.put(item(1, "Q: who leads? A: Alice."))
    store.put(item(2, "a long answer " * 50, suffix="a"))
    store.put(item(1, "another session's turn", session="s2"))

    got = store.get("s1", ["o2", "o9", "o1", "c3"])
    assert [g.id for g in got] == ["o2", "o1"]
    assert got[0].text == "Q: budget? A: 40,000 euros." and got[0].summary == "budget is 40,000 euros"
    assert got[0].turn == 2 and got[0].role == "exchange" and got[0].doc_id == "doc1"
    assert [i.id for i in store.list("s1")] == ["o1", "o2", "o2a"]
    assert [i.id for i in store.list("s2")] == ["o1"]
    assert store.get("s2", ["o2"]) == []

    store.put(item(1, "Q: who leads? A: Alice Moreau.", summary="Alice Moreau leads"))
    assert store.get("s1", ["o1"])[0].text.endswith("Alice Moreau.")
    assert len(store.list("s1")) == 3

    assert store.delete("s1") == 3
    assert store.list("s1") == [] and [i.id for i in store.list("s2")] == ["o1"]


def test_search_stays_in_its_session(backend: str) -> None:
    store = get_offload_store("ns1", backend=backend)
    store.put(item(1, "Q: what is the budget? A: The budget is 40,000 euros for solar panels."))
    store.put(item(2, "Q: who leads engineering? A: Alice Moreau leads the engineering team."))
    store.put(item(1, "Q: what is the budget? A: 40,000 euros.", session="other"))
    hits = store.search("s1", "budget for solar panels", k=5)
    assert hits and hits[0][0].id == "o1" and hits[0][0].session == "s1"
    assert all(i.session == "s1" for i, _ in hits)
    assert hits == sorted(hits, key=lambda pair: -pair[1])
    some = store.search("s1", "budget", k=5, min_score=0.05)
    assert some and all(score >= 0.05 for _, score in some)
    assert store.search("s1", "budget", k=5, min_score=1.01) == []


def test_chroma_items_are_offload_records_of_the_document(longdoc_home: object) -> None:
    store = get_offload_store("ns1")
    assert isinstance(store, ChromaOffloadStore)
    store.put(item(3, "raw turn text", summary="a conclusion"))
    vectors = get_store("ns1")
    assert vectors.count(doc_id="doc1", kind="offload") == 1
    hit = vectors.get(["offload:s1:o3"])[0]
    assert hit.metadata["kind"] == "offload" and hit.metadata["session"] == "s1"
    assert hit.metadata["turn"] == 3 and hit.metadata["summary"] == "a conclusion"
    assert vectors.count(kind="chunk") == 0
    # another namespace does not see it; a fresh process (stores reset) still does
    assert get_offload_store("ns2").list("s1") == []
    reset_stores()
    assert [i.id for i in get_offload_store("ns1").list("s1")] == ["o3"]


def test_memory_backend_is_per_namespace() -> None:
    reset_memory_stores()
    a, b = get_offload_store("ns1", backend="memory"), get_offload_store("ns2", backend="memory")
    assert isinstance(a, MemoryOffloadStore) and a is get_offload_store("ns1", backend="memory") and a is not b
    a.put(item(1, "text"))
    assert b.list("s1") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "x1"},
        {"id": "o"},
        {"id": "o1ab"},
        {"session": ""},
        {"session": "has space"},
        {"session": "-leading"},
        {"role": "note"},
        {"doc_id": ""},
    ],
)
def test_bad_items_are_refused(bad: dict[str, str]) -> None:
    fields = {"id": "o1", "session": "s1", "doc_id": "d", "turn": 1, "role": "exchange", "text": "t", **bad}
    with pytest.raises(InputError):
        MemoryOffloadStore().put(OffloadItem(**fields))  # type: ignore[arg-type]


def test_ids_sessions_and_backends() -> None:
    assert is_offload_id("o1") and is_offload_id("o12a") and not is_offload_id("c1") and not is_offload_id("o1 ")
    assert check_session("chat-1a2b:thread.3") == "chat-1a2b:thread.3"
    with pytest.raises(InputError, match="session"):
        check_session("x" * 200)
    with pytest.raises(InputError, match="backend"):
        get_offload_store("ns1", backend="redis")
    with pytest.raises(InputError, match="namespace"):
        get_offload_store("bad namespace")
