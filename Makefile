# The two commands an operator needs are `make demo` and `make test`; both set up .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-deps java maven jars helm demo test test-unit lint bench dist clean

# Every package at the version constraints.txt pins (pyspark among them: its Kafka connector
# must exist on Maven Central at exactly that version).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[job,test]"
	touch $(STAMP)

setup: $(STAMP)

# Java runs Spark; promtool and prometheus run the alert-rule and dashboard tests; chromium and
# chromedriver run the group page's browser test.
java:
	@command -v java >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

maven: java
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }

# Apache Kafka (the tests' broker) and Spark's Kafka source for the installed pyspark, from
# Maven Central into ~/.cache/rebalance-monitor/jars (REBALANCE_MONITOR_JARS), once.
jars: setup maven
	$(BIN)/python scripts/fetch_jars.py

# The RocketMQ kit's jars come from Debian packages, needed only where tests use the kit
# (ROCKETMQ_KIT set); installed when any of them is not.
ROCKETMQ_PACKAGES = $(shell grep -o '^[a-z0-9][^ ]*' tests/integration/rocketmq-debian-packages.txt)

system-deps: java
	@command -v promtool >/dev/null && command -v prometheus >/dev/null && command -v amtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	@[ -z "$(ROCKETMQ_KIT)" ] || [ "$$(dpkg-query -W -f='$${db:Status-Abbrev}\n' $(ROCKETMQ_PACKAGES) 2>/dev/null | grep -c '^ii')" = "$(words $(ROCKETMQ_PACKAGES))" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(ROCKETMQ_PACKAGES); }

# Helm, for tests/unit/test_helm_chart.py: built once from the Go module proxy (rebuilt when
# HELM_VERSION changes), and the prometheus-operator module, whose
# example/prometheus-operator-crd/ holds the CRDs the chart's monitors and PrometheusRule are
# validated against, into Go's module cache. Both need Go.
HELM_VERSION := v3.22.0
HELM := $(HOME)/.cache/rebalance-monitor/bin/helm
PROMETHEUS_OPERATOR_MODULE := github.com/prometheus-operator/prometheus-operator@v0.93.0

helm:
	@go version -m $(HELM) 2>/dev/null | grep -Eq 'mod[[:space:]]+helm.sh/helm/v3[[:space:]]+$(HELM_VERSION)[[:space:]]' || GOBIN=$(dir $(HELM)) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	@go mod download $(PROMETHEUS_OPERATOR_MODULE)

demo: setup jars
	$(BIN)/rebalance-monitor demo

# Both suites on both cores (pytest-xdist). The integration tests mostly wait on brokers and
# clients: two workers ran every scenario, each RocketMQ one on 4.9.8, 5.3.3 and 5.5.0, in 37:30,
# where one process took 56:40 with the 5.5.0 pass cut to its every_5x subset (2026-12-04, AMD
# EPYC). worksteal: one worker takes over the other's queue when it runs dry, keeping each
# module's tests together. The tests marked `alone` (a standalone Spark cluster of two workers)
# then run with nothing beside them. Then the exact twin (docs/architecture.md, "Fast paths have
# an exact twin"): the unit suite and the end-to-end scenarios again with every step through the
# full definition, no shortcut and no cache.
test: setup system-deps jars helm
	$(BIN)/ruff check streaming producers tests
	$(BIN)/mypy
	$(BIN)/pytest -n 2 --dist worksteal -m "not alone" tests/integration
	$(BIN)/pytest -m alone tests/integration
	$(BIN)/pytest -n 2 tests/unit
	REBALANCE_MONITOR_EXACT=on $(BIN)/pytest -q -n 2 tests/unit
	REBALANCE_MONITOR_EXACT=on $(BIN)/pytest -q tests/integration/test_scenarios_e2e.py tests/integration/test_state_reset.py

test-unit: setup
	$(BIN)/pytest -m unit

bench: setup jars
	for b in tests/benchmarks/bench_*.py; do $(BIN)/python -m tests.benchmarks.$$(basename $$b .py) || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis

# The --py-files zip for spark-submit (docs/deploy.md).
dist: setup
	$(BIN)/python scripts/build_pyfiles.py dist/rebalance_monitor.zip
