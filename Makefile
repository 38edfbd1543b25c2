# The two commands an operator needs are `make demo` and `make test`; both set up .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-deps demo test test-unit lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

# Java runs Spark; promtool and prometheus run the alert-rule and dashboard tests.
system-deps:
	@command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager; }

demo: setup
	$(BIN)/rebalance-monitor demo

test: setup system-deps
	$(BIN)/ruff check streaming producers tests
	$(BIN)/pytest

test-unit: setup
	$(BIN)/pytest -m unit

bench: setup
	$(BIN)/python -m tests.benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
