"""Checkpointers over SQLite and PostgreSQL: real workflows stopped half-way resume where they stopped.

Each workflow runs with a scripted chat model that fails like a dead endpoint at a chosen call;
the saver is closed and opened again before the run is resumed, as after a crash.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from deploy.cluster import postgres, postgres_bindir
from doubles.chat import ScriptedChatModel
from doubles.replies import offload_reply
from graphs.chain.graph import builder as chain_builder
from graphs.offload.graph import builder as offload_builder
from nodes.ingest import ingest
from stores.checkpoint import checkpoint_location, open_checkpointer
from stores.models import ModelError, use_chat_model
from surfaces.resume import plan
from tests.fakes import quoting
from tests.unit.test_resume import Failing as DiesAt

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


class Counter(TypedDict):
    steps: Annotated[list[str], lambda a, b: a + b]


def _graph(checkpointer):  # type: ignore[no-untyped-def]
    b = StateGraph(Counter)
    b.add_node("first", lambda s: {"steps": ["first"]})
    b.add_node("second", lambda s: {"steps": ["second"]})
    b.add_edge(START, "first")
    b.add_edge("first", "second")
    b.add_edge("second", END)
    return b.compile(checkpointer=checkpointer, interrupt_before=["second"])


pytestmark = pytest.mark.xdist_group("postgres")  # one PostgreSQL server for the module, in one test process


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries are not installed (.ci/system-deps installs them)")
    folder = Path(tempfile.mkdtemp(prefix="longdoc-pg-"))
    folder.chmod(0o755)
    try:
        with postgres(folder / "cluster", database="checkpoints") as url:
            yield url
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def saver_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """None: the SQLite file under LONGDOC_HOME; else the PostgreSQL URL (also set as LONGDOC_POSTGRES_URL)."""
    if request.param == "sqlite":
        return None
    url = request.getfixturevalue("postgres_url")
    monkeypatch.setenv("LONGDOC_POSTGRES_URL", url)
    return url


def test_checkpoints_survive_reopening(saver_url: str | None, longdoc_home: Path) -> None:
    config = {"configurable": {"thread_id": f"toy-{saver_url is None}"}}
    with open_checkpointer() as saver:
        graph = _graph(saver)
        graph.invoke({"steps": []}, config)
        assert graph.get_state(config).next == ("second",)
    with open_checkpointer() as saver:
        assert _graph(saver).invoke(None, config)["steps"] == ["first", "second"]
    if saver_url is None:
        assert checkpoint_location() == str(longdoc_home / "checkpoints.sqlite")
        assert (longdoc_home / "checkpoints.sqlite").exists()
    else:
        assert checkpoint_location().startswith("postgresql://longdoc@127.0.0.1:")


MANAGER = json.dumps({"answer": "Bob Chen", "evidence": ["c1"], "explanation": "He manages procurement [c1]."})


def _worker(messages: Sequence[BaseMessage]) -> str:
    return quoting([("procurement", "nothing")], otherwise="who manages procurement")(messages)


def _pieces(model: ScriptedChatModel) -> list[str]:
    """The passages each worker call read, in call order."""
    return [
        str(c[-1].content).split("Passages:", 1)[-1] for c in model.calls if "Evidence so far:" in str(c[-1].content)
    ]


def test_a_chain_run_stopped_half_way_resumes_on_a_reopened_saver(saver_url: str | None) -> None:
    doc_id = ingest(str(FALCON), chunk_size=60, chunk_overlap=0).doc_id
    question = {"question": "Who manages procurement?", "doc_id": doc_id}
    context = {"order": "chow-liu-bfs", "read_all": True}
    reference_model = DiesAt(rules=[("manager of a chain", MANAGER)], default=_worker)
    with open_checkpointer() as saver, use_chat_model(reference_model):
        reference = chain_builder.compile(checkpointer=saver).invoke(
            question, {"configurable": {"thread_id": f"ref-{saver_url is None}"}}, context=context
        )
    read = _pieces(reference_model)
    assert len(read) >= 4

    model = DiesAt(rules=[("manager of a chain", MANAGER)], default=_worker, fail_at=read[2][:80], down=3)
    config = {"configurable": {"thread_id": f"chain-{saver_url is None}"}}
    with open_checkpointer() as saver, use_chat_model(model), pytest.raises(ModelError):
        chain_builder.compile(checkpointer=saver).invoke(question, config, context=context)
    assert _pieces(model) == read[:2]  # the third worker died
    with open_checkpointer() as saver, use_chat_model(model):
        graph = chain_builder.compile(checkpointer=saver)
        value, resume = plan(graph, question, config)  # type: ignore[arg-type]
        out = graph.invoke(value, resume, context=context)
    assert _pieces(model) == read  # the two finished workers were not asked again
    for key in ("answer", "read", "citations", "calls", "order", "notes"):
        assert out[key] == reference[key], key


def test_a_chat_session_stopped_half_way_resumes_on_a_reopened_saver(saver_url: str | None) -> None:
    doc_id = ingest(str(FALCON)).doc_id
    offloader = "turn it into a note"
    model = DiesAt(default=offload_reply, fail_at=offloader)
    config = {"configurable": {"thread_id": f"chat-{saver_url is None}"}}

    def turn(question: str) -> dict[str, Any]:
        with open_checkpointer() as saver, use_chat_model(model):
            graph = offload_builder.compile(checkpointer=saver)
            value, resume = plan(graph, {"question": question, "doc_id": doc_id}, config)  # type: ignore[arg-type]
            return graph.invoke(value, resume)  # type: ignore[no-any-return]

    assert turn("Who leads engineering?")["turn"] == 1
    model.down = 2  # the second turn's offloader fails, and so does the graph's retry of it
    with pytest.raises(ModelError):
        turn("Who manages procurement?")
    answered = len(model.calls)
    second = turn("Who manages procurement?")
    assert second["turn"] == 2
    assert all(offloader in str(c[0].content) for c in model.calls[answered:])  # only the offloader ran again
    assert turn("When do trials start?")["turn"] == 3
    with open_checkpointer() as saver:
        history = offload_builder.compile(checkpointer=saver).get_state(config).values["history"]
    assert [h["turn"] for h in history] == [1, 2, 3]
