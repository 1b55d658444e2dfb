# yolo_sm: two commands on a fresh machine with Python 3.11 -- `make report` and `make test`.
#
# Two virtual environments, each installed under the exact pins of constraints.txt and marked
# done by a stamp file (a changed pyproject.toml or constraints.txt installs again):
#   .venv                     `make test` and the other developer targets: every extra (report,
#                             collect with torch/ultralytics, onnx, gpu, distributed, monitor, dev).
#   .cache/report-venv        `make report`: the base and the report extra only (pandas, pyarrow,
#                             pyyaml, plotly, ipywidgets, nbclient, nbconvert, nbformat,
#                             ipykernel): no torch, so rendering proves that the notebooks
#                             analyse a dataset root without the collect layer, on any machine.
# They never share packages, so `make report` after `make test` (or before it) works as on a
# fresh clone. CI runs `make test` only.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.yolo_sm-installed
EXTRAS := report,collect,onnx,gpu,ncu,distributed,monitor,dev
REPORT_VENV  ?= .cache/report-venv
REPORT_BIN   := $(REPORT_VENV)/bin
REPORT_STAMP := $(REPORT_VENV)/.yolo_sm-installed
# the dataset root the site is rendered from (a name under data/ or a folder) and where it goes:
#   make report DATA=cpu SITE=site/cpu
DATA ?= h200
SITE ?= site
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup setup-report report test test-fast test-gpu lint format strip clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[$(EXTRAS)]"
	@touch $@

setup-report: $(REPORT_STAMP)

$(REPORT_STAMP): pyproject.toml constraints.txt
	@test -x $(REPORT_BIN)/python || $(PYTHON) -m venv $(REPORT_VENV)
	$(REPORT_BIN)/python -m pip install -q -c constraints.txt -e ".[report]"
	@touch $@

## Execute every notebook from the dataset root $(DATA) and render them into $(SITE)/ (index.html).
report: setup-report
	$(REPORT_BIN)/python -m yolo_sm render --data $(DATA) --notebooks notebooks --out $(SITE)

## Lint, then the whole test suite on this machine, one worker a core (pytest-xdist), notebooks
## included (GPU tests skip without CUDA).
test: setup
	$(BIN)/ruff check yolo_sm tests tools
	$(BIN)/python -m pytest -q -n auto --dist worksteal

## Everything but the notebook executions.
test-fast: setup
	$(BIN)/python -m pytest -q -n auto -m "not notebooks"

## GPU tests only (run on a CUDA machine, e.g. the H200).
test-gpu: setup
	$(BIN)/python -m pytest -q -m gpu

lint: setup
	$(BIN)/ruff check yolo_sm tests tools

format: setup
	$(BIN)/ruff format yolo_sm tests tools

## Remove outputs from notebooks before committing.
strip: setup-report
	$(REPORT_BIN)/jupyter nbconvert --clear-output --inplace notebooks/*.ipynb

clean:
	rm -rf site .pytest_cache .ruff_cache
