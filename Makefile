# Each target sets up .venv by itself, so `make run` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# mypy reads the packages as installed: headwater/ holds headwater, broker/ holds headwater.broker, ...
TYPECHECK := build/typecheck
TYPECHECK_PATH := $(CURDIR)/$(TYPECHECK):$(CURDIR)/tests:$(CURDIR)/tests/integration:$(CURDIR)/bench$(foreach p,$(wildcard plugins/*/src),:$(CURDIR)/$(p))
MYPY := MYPYPATH="$(TYPECHECK_PATH)" "$(CURDIR)/$(BIN)/mypy" --config-file "$(CURDIR)/pyproject.toml"

.PHONY: run check test lint typecheck bench bench-latency clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	@echo "Starting Headwater: broker on 127.0.0.1:9092, Connect REST API on http://127.0.0.1:8083"
	@mkdir -p data && test -f data/quickstart-input.txt || cp configs/quickstart/input.txt data/quickstart-input.txt
	@echo "Quickstart: lines of data/quickstart-input.txt flow through topic quickstart-lines into data/quickstart-output.txt"
	@echo "Try: echo hello >> data/quickstart-input.txt; tail -f data/quickstart-output.txt; curl -s localhost:8083/connectors?expand=status"
	$(BIN)/headwater up configs/quickstart/file-source.json configs/quickstart/file-sink.json

typecheck: $(STAMP)
	rm -rf $(TYPECHECK)/headwater && mkdir -p $(TYPECHECK)/headwater
	for f in headwater/*; do ln -s "$(CURDIR)/$$f" $(TYPECHECK)/headwater/; done
	for d in broker connect connectors; do ln -s "$(CURDIR)/$$d" $(TYPECHECK)/headwater/$$d; done
	cd $(TYPECHECK) && $(MYPY) -p headwater
	@# Tests, benchmarks and plugins import what their conftest.py or script puts on sys.path; checked in
	@# groups holding no two modules of one name (each test folder has a conftest.py)
	cd $(TYPECHECK) && $(MYPY) "$(CURDIR)/tests/conftest.py" "$(CURDIR)/tests/support" "$(CURDIR)/tests/unit" \
		"$(CURDIR)/bench"
	cd $(TYPECHECK) && $(MYPY) "$(CURDIR)/tests/integration"
	cd $(TYPECHECK) && $(MYPY) "$(CURDIR)/tests/browser"
	for p in plugins/*/; do (cd $(TYPECHECK) && $(MYPY) "$(CURDIR)/$$p") || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory typecheck

# The quick door, before every commit: lint, types and the tests that need no JVM, PostgreSQL or browser and
# are not slow (tests/support/markers.py says which). `make test` runs them all (CI).
FAST := not spark and not postgres and not browser and not slow

check: lint
	$(BIN)/python -m pytest -q -m "$(FAST)"

# The full suite, its files spread over TEST_WORKERS processes (a file's tests stay together, so module
# fixtures start once); TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/broker_throughput.py

# Produce-to-consume latency through the broker (~30 s): run before submitting a change to the request path.
# Compare with another commit on the same machine load: make bench-latency LATENCY_ARGS="--runs 3 --against main"
bench-latency: $(STAMP)
	$(BIN)/python bench/latency.py $(LATENCY_ARGS)

clean:
	rm -rf $(VENV) data build *.egg-info
