# make test: set up .venv if needed, then ruff, mypy --strict and pytest, once on the compiled hot
#            path (where a C compiler built it at install) and once on the pure-Python one.
# make demo: set up .venv if needed, then run the OCR demo (examples/ocr_dbnet).
PYTHON ?= python3
# torch comes first and pinned: a bare "torch" requirement would pull a multi-GB CUDA build.
# TORCH_PIP_ARGS picks where it comes from, e.g. PyTorch's CPU-only wheel index on a machine
# without a GPU (see README); empty: the package index pip is configured with.
TORCH ?= torch==2.13.0
TORCH_PIP_ARGS ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.perfkit-installed

.PHONY: test lint typecheck unit demo bench clean

$(STAMP): pyproject.toml setup.py perfkit/_speedups.c integrations/lightning/pyproject.toml integrations/huggingface/pyproject.toml examples/requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_PIP_ARGS) "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[all,dev]" -e "integrations/lightning[all]" -e integrations/huggingface -r examples/requirements.txt
	# LitData's StreamingDataLoader, for the loader tests only: its declared dependencies would pull
	# torchvision (and another torch), and it imports with boto3 alone
	$(BIN)/python -m pip install --quiet --no-deps "litdata==0.2.76" && $(BIN)/python -m pip install --quiet "boto3>=1.34"
	touch $(STAMP)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m perfkit --version
	$(BIN)/python -m pytest
	PERFKIT_PURE=1 $(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m examples.ocr_dbnet

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_overhead.py --both

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
