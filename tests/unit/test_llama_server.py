"""Which llama.cpp build serves the bundled models, and the native build's child server behind ensure_server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from stores import llama_server as reader
from stores import local_model
from stores.errors import InputError, ModelError
from stores.llama_server import Choice, ServerOptions, choose, native_args, server_options
from stores.local_model import DEFAULT_MODEL

# A stand-in for llama-server: answers --version, or serves /health on the --port it is given; SERVER_FAILS=1
# makes it exit at start-up.
FAKE_SERVER = """#!{python}
import http.server, os, sys
if "--version" in sys.argv:
    sys.exit(int(os.environ.get("VERSION_EXIT", "0")))
if os.environ.get("SERVER_FAILS"):
    print("error: unknown CPU feature", flush=True)
    sys.exit(3)
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``llama-server`` in place of the native build's; the model file is not joined."""
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(FAKE_SERVER.format(python=sys.executable))
    binary.chmod(0o755)
    monkeypatch.setattr(reader, "native_binary", lambda: binary)
    monkeypatch.setattr(local_model, "model_path", lambda cache_dir=None, model=DEFAULT_MODEL: tmp_path / model.file)
    monkeypatch.setenv("LONGDOC_CACHE_DIR", str(tmp_path / "cache"))
    reader._runs.cache_clear()
    yield binary
    reader._runs.cache_clear()


def test_the_reader_setting_chooses_the_build_and_says_why(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_READER", "auto")
    chosen = choose()
    assert (chosen.backend, chosen.binary) == ("native", fake_binary) and str(fake_binary) in chosen.reason
    monkeypatch.setenv("LONGDOC_READER", "xllamacpp")
    assert choose().backend == "xllamacpp"
    monkeypatch.setenv("LONGDOC_READER", "fastest")
    with pytest.raises(InputError, match="LONGDOC_READER must be one of auto, native, xllamacpp"):
        choose()
    # A build that does not start on this CPU is passed over under auto, and refused when insisted on.
    monkeypatch.setenv("VERSION_EXIT", "132")
    reader._runs.cache_clear()
    monkeypatch.setenv("LONGDOC_READER", "auto")
    fallback = choose()
    assert (
        fallback.backend == "xllamacpp"
        and "exited with 132" in fallback.reason
        and "make fast-reader" in fallback.reason
    )
    monkeypatch.setenv("LONGDOC_READER", "native")
    with pytest.raises(InputError, match="LONGDOC_READER=native, but llama-server --version exited with 132"):
        choose()
    monkeypatch.setattr(reader, "native_binary", lambda: None)
    monkeypatch.setenv("LONGDOC_READER", "auto")
    assert "no llama.cpp build for this CPU is installed" in choose().reason


def test_the_native_server_gets_the_settings_xllamacpp_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_N_CTX", "4096")
    monkeypatch.setenv("LONGDOC_N_PARALLEL", "2")
    monkeypatch.setenv("LONGDOC_THREADS", "3")
    monkeypatch.setenv("LONGDOC_CACHE_REUSE", "256")
    options = server_options("m", Path("/models/m.gguf"), 4321, Path("/models/d.gguf"))
    args = native_args(Path("/bin/llama-server"), options)
    flags = dict(zip(args[1::2], args[2::2], strict=False))
    assert flags["--model"] == "/models/m.gguf" and flags["--alias"] == "m" and flags["--host"] == "127.0.0.1"
    assert flags["--port"] == "4321" and flags["--ctx-size"] == str(4096 * 2) and flags["--parallel"] == "2"
    assert flags["--threads"] == flags["--threads-batch"] == "3" and flags["--cache-reuse"] == "256"
    assert args[args.index("--spec-draft-model") + 1] == "/models/d.gguf" and "draft-simple" in args
    params = reader.xllamacpp_params(options)
    assert (params.n_ctx, params.n_parallel, params.n_cache_reuse, params.port) == (8192, 2, 256, 4321)
    assert params.cpuparams.n_threads == 3 and params.speculative.draft.mparams.path == "/models/d.gguf"
    assert params.n_batch == int(flags["--batch-size"]) and params.n_ubatch == int(flags["--ubatch-size"])
    flash = native_args(Path("/bin/llama-server"), ServerOptions(Path("m"), "m", 1, 512, flash_attn=True))
    assert flash[flash.index("--flash-attn") + 1] == "on"


@pytest.mark.enable_socket
def test_ensure_server_runs_the_native_build_as_a_child_and_stops_it(
    fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_READER", "native")
    server = local_model.ensure_server()
    assert server.backend == "native" and server.pid is not None and server.pid != os.getpid()
    assert httpx.get(f"http://127.0.0.1:{server.port}/health").status_code == 200
    assert reader.system_info(server.handle) == ""  # no libllama.so beside the stand-in
    assert local_model.ensure_server() is server  # started once
    handle = server.handle
    local_model.stop_server()
    assert handle.exited() is not None and not handle.log.exists() and server.handle is None


@pytest.mark.enable_socket
def test_a_native_server_that_dies_at_start_is_a_clear_error(
    fake_binary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_READER", "native")
    monkeypatch.setenv("SERVER_FAILS", "1")
    with pytest.raises(ModelError, match="exited with 3 while starting: error: unknown CPU feature"):
        local_model.ensure_server()
    assert local_model.running_server() is None


def test_a_start_without_a_binary_is_refused() -> None:
    with pytest.raises(ModelError, match="no llama-server binary"):
        reader.start(Choice("native", "test"), ServerOptions(Path("m"), "m", 1, 512), Path("log"))
