# medallion: `make run` runs the default pipeline on sample data, `make test` runs the tests.
# Each target installs what it needs first (a virtualenv in .venv, JVM jars from Maven Central).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= data
export MEDALLION_LANDING ?= $(CURDIR)/$(DATA)/landing
export MEDALLION_LAKEHOUSE ?= $(CURDIR)/$(DATA)/lakehouse
# Spark binds to loopback: nothing here listens beyond this machine.
export SPARK_LOCAL_IP ?= 127.0.0.1

.DEFAULT_GOAL := help
.PHONY: help setup run test test-unit lint bench clean wheel chromium report report-check

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m medallion.warmup
	touch $(STAMP)

setup: $(STAMP) ## create .venv, install the package and fetch the JVM jars

run: setup ## generate sample data, run bronze -> silver -> gold, show the gold tables
	$(BIN)/medallion generate --events 20000 --files 4 --burst sample --seed 7
	$(BIN)/medallion run all
	$(BIN)/medallion show --limit 10

test: setup ## run the test suite (unit, integration, reliability)
	$(BIN)/pytest -q

test-unit: setup ## run the unit tests only
	$(BIN)/pytest -q tests/unit

lint: setup ## ruff and mypy
	$(BIN)/ruff check medallion jobs tests
	$(BIN)/mypy

bench: setup ## benchmark each layer on 1M generated events against plain Spark
	$(BIN)/python -m tests.benchmarks.bench_pipeline

wheel: setup ## build the package wheel into dist/ (ship it with `medallion submit-cmd --wheel`)
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .

chromium: ## install Debian's chromium (headless check of the HTML report) if it is missing
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium; }

report: setup ## write data/report.html from the lakehouse's monitoring tables
	$(BIN)/medallion report --output $(DATA)/report.html

report-check: setup chromium ## render the report in headless chromium and take a screenshot
	$(BIN)/medallion report --output $(DATA)/report.html
	$(BIN)/python -m medallion.report_check $(DATA)/report.html $(DATA)/report.png

clean: ## remove generated data (not .venv)
	rm -rf $(DATA) spark-warehouse metastore_db derby.log
