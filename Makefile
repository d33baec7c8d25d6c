# make test: set up .venv if needed, then ruff, mypy --strict and pytest on the compiled hot path
#            (where a C compiler built it at install), then the hot path's own tests again on the
#            pure-Python one (tests/test_hot_path.py runs one program on both, to the nanosecond).
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

.PHONY: test lint typecheck unit demo bench gpu-check clean

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

# The tests of every entry point the compiled hot path takes (@timed, section, timed_iter, the
# registry's buffer and drain) and of their fallbacks: what PERFKIT_PURE=1 changes.
HOT_PATH_TESTS := tests/test_timing.py tests/test_section.py tests/test_iteration.py \
	tests/test_registry.py tests/test_buffer.py tests/test_stress.py tests/test_tasks_and_threads.py \
	tests/test_bad_records.py tests/test_bounds.py tests/test_state.py tests/test_cuda_timing.py \
	tests/test_tracer.py tests/test_snapshot.py

unit: $(STAMP)
	$(BIN)/python -m perfkit --version
	$(BIN)/python -m pytest --durations=30
	PERFKIT_PURE=1 $(BIN)/python -m pytest --durations=5 $(HOT_PATH_TESTS)

demo: $(STAMP)
	$(BIN)/python -m examples.ocr_dbnet

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_overhead.py --both

# On a GPU machine, from a checkout (no .venv, no install: torch, numpy, psutil, nvidia-ml-py and
# pytest importable by $(PYTHON)): the planted scenarios, then tests/gpu, as one table. The table
# goes to $$GPU_CHECK_OUT, else $$OUT/gpu_check.md where OUT is set. GPU_CHECK_ARGS="--device cpu"
# runs the harness on CPU (events stamped by the host clock).
GPU_CHECK_ARGS ?=
gpu-check:
	PYTHONPATH=. PERFKIT_PURE=1 $(PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
