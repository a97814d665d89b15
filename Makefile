# Two commands set up everything on a fresh machine: `make synth` and `make test`.
# .venv and node_modules are rebuilt only when pyproject.toml / package-lock.json change (stamp files).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CDK := node_modules/.bin/cdk
ENV ?=
# Node 20 works; jsii's end-of-life banner for it is noise in every synth.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
# Material for MkDocs prints a banner about MkDocs 2.0 on every build.
export NO_MKDOCS_2_WARNING := 1
# Let Python cache our modules' bytecode (__pycache__/, git-ignored): compiling src/ again costs ~0.2 s per synth.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: synth test check-fast lint format bench clean golden docs promtool amtool

$(VENV)/.stamp-deps: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
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

setup: $(VENV)/.stamp-deps node_modules/.stamp-deps

synth: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(CDK) synth --quiet --no-notices --no-version-reporting $(if $(ENV),-c env=$(ENV))
	@$(BIN)/python -m llm_eks.infra.report cdk.out

# The rule unit tests run Prometheus's promtool (tests/promtool.py); it is a system package, not a Python one.
promtool:
	@command -v promtool >/dev/null || { echo "make: promtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus (Debian/Ubuntu; .ci/run does), brew install prometheus (macOS)" >&2; exit 1; }

# The alert routing tests run Alertmanager's amtool (tests/amtool.py); a system package too.
amtool:
	@command -v amtool >/dev/null || { echo "make: amtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus-alertmanager (Debian/Ubuntu; .ci/run does), brew install alertmanager (macOS)" >&2; exit 1; }

test: promtool amtool setup $(CHECKOV_VENV)/.stamp-deps
	$(BIN)/ruff check src tests app.py examples benchmarks docgen
	$(BIN)/ruff format --check src tests app.py examples benchmarks docgen
	# Strict type check of src/ ([tool.mypy] in pyproject.toml): ~1-3 s with the .mypy_cache, minutes cold.
	$(BIN)/mypy
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# The inner loop: config, planner, charts, checks and CLI tests, no CDK synth, moto, linter or subprocess (the
# `synth` marker, tests/conftest.py); seconds, not minutes. `make test` stays the full gate.
check-fast: setup
	$(BIN)/ruff check src tests app.py examples benchmarks docgen
	$(BIN)/python -m pytest -q -n 2 -m "not synth"

format: setup
	$(BIN)/ruff check --fix src tests app.py examples benchmarks docgen
	$(BIN)/ruff format src tests app.py examples benchmarks docgen

# The documentation site into site/ (strict: a broken link, anchor or reference fails); `make test` builds it too.
docs: setup
	$(BIN)/mkdocs build --strict

golden: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.golden_output

bench: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python benchmarks/bench.py $(ARGS)

clean:
	rm -rf cdk.out .pytest_cache
