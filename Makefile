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
.PHONY: help setup run test soak test-unit lint bench bench-sql bench-quality bench-listing bench-changes bench-gold clean sql thrift-up thrift-down kafka-jars kafka-up kafka-down kafka-demo airflow-venv s3proxy s3-server infra-plan infra-apply wheel maven chromium report report-check
KAFKA_DATA ?= $(CURDIR)/$(DATA)/kafka
KAFKA_PORT ?= 9092

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m medallion.spark.warmup
	touch $(STAMP)

setup: $(STAMP) ## create .venv, install the package and fetch Spark's JVM jars

# The sample's events end a few hours before now, so its freshness expectation holds.
SAMPLE_START = $(shell $(PYTHON) -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) - d.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ"))')

run: setup ## sample data (events generated, orders and account changes from samples/), bronze -> silver -> gold, show the gold tables and an account history
	$(BIN)/medallion generate --events 20000 --files 4 --burst sample --seed 7 --start $(SAMPLE_START)
	$(BIN)/medallion land --entity orders samples/landing/orders/*.csv
	$(BIN)/medallion land --entity products samples/landing/products/*.csv
	$(BIN)/medallion land --entity stores samples/landing/stores/*.csv
	$(BIN)/medallion land --entity account_changes samples/landing/account_changes/*.jsonl
	$(BIN)/medallion run all
	$(BIN)/medallion show --limit 10
	$(BIN)/medallion sql "$(ACCOUNT_HISTORY)"

ACCOUNT_HISTORY = SELECT account_id, plan, country, valid_from, valid_to, is_current \
	FROM silver.account_history ORDER BY account_id, valid_from

TEST_NEEDS := setup s3proxy kafka-jars chromium airflow-venv
# One pytest process (one Spark JVM) per group, the quick ones first; every group runs, and the
# suite fails if one did. A JVM that ran every test's pipelines would hold too much heap by the end.
TEST_GROUPS := "tests/unit tests/transforms" "tests/integration" "tests/operations tests/reliability"
# What the tests need is fetched side by side: mostly downloads, each into a folder of its own.
test: ## run the test suite (unit, integration, reliability, operations)
	$(MAKE) --no-print-directory -j4 $(TEST_NEEDS)
	@failed=0; for group in $(TEST_GROUPS); do \
		echo "== pytest $$group"; $(BIN)/pytest -q --durations=20 $$group || failed=1; \
	done; exit $$failed

SOAK_SEEDS ?= 1,2,3,4,5,6,7
SOAK_KILLS ?= 4
soak: setup ## SIGKILL runs at random instants: 2 x SOAK_KILLS kills per seed over SOAK_SEEDS (56 by default)
	MEDALLION_SOAK_SEEDS=$(SOAK_SEEDS) MEDALLION_SOAK_KILLS=$(SOAK_KILLS) \
		$(BIN)/pytest -q -s -p no:cacheprovider tests/reliability/test_kill_anywhere.py

test-unit: setup ## run the unit tests only (pure Python: they start no JVM)
	$(BIN)/pytest -q tests/unit

lint: setup ## ruff (Airflow's rules on the DAG too) and mypy against the oldest and newest Python
	$(BIN)/ruff check medallion jobs tests infra/scheduling
	$(BIN)/mypy --python-version 3.10
	$(BIN)/mypy --python-version 3.13

bench: setup ## benchmark each layer on 1M generated events against plain Spark
	$(BIN)/python -m tests.benchmarks.bench_pipeline

bench-gold: setup ## gold kept stateful, by recompute and by a batch job, on 1M events (EVENTS=4000000 for the large run)
	$(BIN)/python -m tests.benchmarks.bench_gold_refresh --events $(or $(EVENTS),1000000)

bench-sql: setup ## five analyst queries as whole medallion sql processes, fast path vs Spark, on 1M events
	$(BIN)/python -m tests.benchmarks.bench_sql --events $(or $(EVENTS),1000000)

bench-quality: setup ## silver with and without the quality gate on 1M events (EVENTS=100000 for a quick run)
	$(BIN)/python -m tests.benchmarks.bench_quality --events $(or $(EVENTS),1000000)

bench-changes: setup ## a change flow's increment on histories of 1M and 100k changes (CHANGES=100000 for a quick run)
	$(BIN)/python -m tests.benchmarks.bench_changes --changes $(or $(CHANGES),1000000) --keys $(or $(KEYS),100000)

bench-listing: setup s3proxy ## list 10,000 landing files, local and on S3, through Hadoop and by Python
	$(BIN)/python -m tests.benchmarks.bench_listing --files $(or $(FILES),10000)

sql: setup ## interactive SQL shell over the lakehouse's tables and views (no JVM; ENGINE=spark: spark-sql)
	$(BIN)/medallion sql --shell --engine $(or $(ENGINE),duckdb)

thrift-up: setup ## start the Spark Thrift Server (JDBC/ODBC, HiveServer2) on loopback, print its URL
	$(BIN)/medallion thrift up

thrift-down: setup ## stop the Thrift Server started by thrift-up
	$(BIN)/medallion thrift down

KAFKA_STAMP := infra/kafka/lib/.complete

$(KAFKA_STAMP): infra/kafka/pom.xml | maven
	infra/kafka/broker.sh fetch

kafka-jars: $(KAFKA_STAMP) ## fetch the Kafka broker's jars (the tests' and kafka-up's) from Maven Central

kafka-up: kafka-jars ## start a local Kafka broker (KRaft, 127.0.0.1:$(KAFKA_PORT), data in $(DATA)/kafka)
	infra/kafka/broker.sh start $(KAFKA_DATA) $(KAFKA_PORT)

kafka-down: ## stop the local Kafka broker
	infra/kafka/broker.sh stop $(KAFKA_DATA)

kafka-demo: setup ## publish sample events to the local broker and run them to gold
	$(BIN)/medallion produce --events 5000 --bootstrap-servers 127.0.0.1:$(KAFKA_PORT)
	$(BIN)/medallion run all --read-from kafka --bootstrap-servers 127.0.0.1:$(KAFKA_PORT)
	$(BIN)/medallion show --limit 10

# ---- Airflow: the DAG's own venv (its test imports infra/scheduling/medallion_dag.py there) -----
AIRFLOW_VENV := .airflow-venv
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

# Not in .venv: Airflow's pins (pandas 3, the Spark provider's pyspark-client) clash with the
# project's. Every version is pinned in the requirements file (Airflow's constraints, offline).
$(AIRFLOW_STAMP): infra/scheduling/airflow-requirements.txt
	rm -rf $(AIRFLOW_VENV)
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --disable-pip-version-check -r infra/scheduling/airflow-requirements.txt
	touch $@

airflow-venv: $(AIRFLOW_STAMP) ## install Airflow 3 and its Spark provider in .airflow-venv (for the DAG's test)

# ---- S3: the local S3-compatible server, and the buckets of an environment ------------------
S3PROXY_STAMP := infra/s3proxy/lib/.resolved
ENV ?= dev

# A Maven repository of its own: nothing lands in ~/.m2 (medallion/spark/ivysettings.xml says why).
$(S3PROXY_STAMP): infra/s3proxy/pom.xml | maven
	rm -rf infra/s3proxy/lib
	mvn -q -B -f infra/s3proxy/pom.xml -Dmaven.repo.local=$(CURDIR)/infra/s3proxy/.m2 package
	touch $@

s3proxy: $(S3PROXY_STAMP) ## fetch S3Proxy (the tests' S3-compatible server) from Maven Central

s3-server: setup s3proxy ## serve $(DATA)/s3 over S3 on 127.0.0.1 (export AWS_ACCESS_KEY_ID/SECRET first)
	$(BIN)/python -m medallion.ops.infra.s3proxy --data $(DATA)/s3

# The buckets come from conf/$(ENV).yaml, not from the local MEDALLION_* paths exported above.
infra-plan: setup ## dry run: print what infra-apply would change for ENV (make infra-plan ENV=dev)
	env -u MEDALLION_LANDING -u MEDALLION_LAKEHOUSE $(BIN)/medallion infra plan --env $(ENV)

infra-apply: setup ## create or fix the buckets of ENV: versioning, encryption, lifecycle, no public access
	env -u MEDALLION_LANDING -u MEDALLION_LAKEHOUSE $(BIN)/medallion infra apply --env $(ENV) $(INFRA_FLAGS)

wheel: setup ## build the package wheel into dist/ (ship it with `medallion submit-cmd --wheel`)
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .

maven: ## install Debian's Maven if mvn is missing (it fetches the Kafka broker's and S3Proxy's jars)
	@command -v mvn >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends maven; }

# After maven: one apt-get at a time.
chromium: | maven ## install Debian's chromium (headless check of the HTML report) if it is missing
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium; }

report: setup ## write data/report.html from the lakehouse's monitoring tables
	$(BIN)/medallion report --output $(DATA)/report.html

report-check: setup chromium ## render the report in headless chromium and take a screenshot
	$(BIN)/medallion report --output $(DATA)/report.html
	$(BIN)/python -m medallion.ops.report_check $(DATA)/report.html $(DATA)/report.png

clean: ## remove generated data (not .venv)
	rm -rf $(DATA) spark-warehouse metastore_db derby.log
