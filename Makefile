# One entry point for set-up, tests, lint and benchmarks.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA ?= ../shared/data

.PHONY: install system test unit lint format demo serve dev bench scaleout bench-serve plots notebooks

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	if [ -f tests/js/package-lock.json ]; then npm ci --prefix tests/js --no-audit --no-fund --silent; fi
	touch $(STAMP)

install: $(STAMP)

# Servers and browsers some tests use (Debian packages; needs root). Tests that need them skip without them.
system:
	bash .ci/system-deps

# The tests, then the reliability benchmark (scripted endpoint and `langgraph dev`, about 5 minutes on 2
# cores; exits 1 when a suite falls short). Its JSON goes to a temporary file: the committed figures are
# refreshed by hand.
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest
	out=$$(mktemp "$${TMPDIR:-/tmp}/longdoc-reliability.XXXXXX") && $(PY) -m bench.reliability --out "$$out" && rm -f "$$out"

unit: install
	$(PY) -m pytest tests/unit

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

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
