# Each target sets up .venv by itself, so `make run` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

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

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/broker_throughput.py

clean:
	rm -rf $(VENV) data build *.egg-info
