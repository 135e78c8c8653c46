# memoryd — every target sets up .venv itself when it is missing (contract §6).
# uv installs exactly what uv.lock pins; it is bootstrapped into .uv/ from PyPI with the system python3.
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := .uv/bin/uv
VENV := .venv
STAMP := $(VENV)/.memoryd-installed
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)
export LANCEDB_LOG := error

.PHONY: setup run test eval bench lint format conformance clean

setup: $(STAMP)

$(UV):
	$(PYTHON) -m venv .uv
	.uv/bin/python -m pip install -q "uv==$(UV_VERSION)"

# Bytecode now, not at the first start: the daemon an agent's shim starts on a new user's first day would
# otherwise compile the MCP SDK, LanceDB and memoryd from source before answering (bench/bench_coldstart.py).
$(STAMP): $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --compile-bytecode --python "$$($(PYTHON) -c 'import sys; print(sys.executable)')"
	$(VENV)/bin/python -m compileall -q daemon shim
	touch $(STAMP)

# The terminal shows one line once the daemon is ready (and warnings/errors); MEMORYD_LOG_LEVEL=info for the log.
run: $(STAMP)
	@MEMORYD_LOG_LEVEL=$${MEMORYD_LOG_LEVEL:-warning} $(VENV)/bin/memoryd serve

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

eval: $(STAMP)
	$(VENV)/bin/memoryd eval --board ../shared/eval/board-v1/board --queries ../shared/eval/board-v1/dev.jsonl
	$(VENV)/bin/memoryd eval --corpus ../shared/eval/locomo/corpus.jsonl --queries ../shared/eval/locomo/queries.jsonl --scope prefix
	$(VENV)/bin/memoryd eval --corpus ../shared/eval/scifact/corpus.jsonl --queries ../shared/eval/scifact/queries.jsonl --scope global
	$(VENV)/bin/memoryd eval --corpus ../shared/eval/cosqa/corpus.jsonl --queries ../shared/eval/cosqa/queries.jsonl --scope global
	$(VENV)/bin/memoryd eval --small ../shared/eval
	$(VENV)/bin/memoryd eval --filing ../shared/eval

bench: $(STAMP)
	$(VENV)/bin/python bench/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check daemon shim tests bench
	$(VENV)/bin/ruff format --check daemon shim tests bench

format: $(STAMP)
	$(VENV)/bin/ruff check --fix daemon shim tests bench
	$(VENV)/bin/ruff format daemon shim tests bench

clean:
	rm -rf $(VENV) .uv .pytest_cache .ruff_cache

# The scenarios through the shim (via a stdio gateway), then straight against the daemon's own /mcp.
conformance: $(STAMP)
	bash conformance/run.sh
	bash conformance/run.sh --http
