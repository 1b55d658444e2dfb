# yolo_sm: two commands on a fresh machine with Python 3.11 -- `make report` and `make test`.
# Both create .venv when absent (reusing it otherwise) and install the package with its notebook,
# ONNX, GPU-profiler and dev extras under the exact pins of constraints.txt.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.yolo_sm-installed
EXTRAS := notebooks,onnx,gpu,dev
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup report test test-fast test-gpu lint format strip clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $@

## Execute every notebook from the shipped data and render them into site/ (site/index.html).
report: setup
	$(BIN)/yolo-sm render --notebooks notebooks --out site

## Lint, then the whole test suite on this machine, notebooks included (GPU tests skip without CUDA).
test: setup
	$(BIN)/ruff check yolo_sm tests tools
	$(BIN)/python -m pytest -q

## Everything but the notebook executions.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not notebooks"

## GPU tests only (run on a CUDA machine, e.g. the H200).
test-gpu: setup
	$(BIN)/python -m pytest -q -m gpu

lint: setup
	$(BIN)/ruff check yolo_sm tests tools

format: setup
	$(BIN)/ruff format yolo_sm tests tools

## Remove outputs from notebooks before committing.
strip: setup
	$(BIN)/python -m yolo_sm.report.render --strip notebooks

clean:
	rm -rf site .pytest_cache .ruff_cache
