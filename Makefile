# Two commands on a fresh machine (Python >= 3.11 and pip):
#   make run    set up .venv and run the embedded default workflow end to end (offline)
#   make test   set up .venv and run the test suite
#   make test-fast   the library tests only (no Snakemake runs): for iterating
# A GPU machine keeps its own CUDA build of torch: torch is installed only when missing
# (create the venv with VENV_FLAGS=--system-site-packages to reuse a system torch).

PYTHON ?= python3
VENV ?= .venv
VENV_FLAGS ?=
TORCH ?= torch==2.13.0
CORES ?= all
BIN := $(VENV)/bin

.PHONY: setup run report test test-fast bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The extras the target needs: the tests also exercise the dataset sources and the benchmarks (pyproject.toml).
EXTRAS ?=
test test-fast: EXTRAS = [test,datasets,eval]

# uv resolves and installs the other ~100 packages in about 16 s where pip takes about 40 s; pip
# stays the fallback (and installs torch, so a site's pip configuration picks the build).
# --compile-bytecode as pip does: without .pyc files every early job compiles the imports it
# needs, which made the embedded default's workflow 40 % slower.
setup: $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet uv \
		&& $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".$(EXTRAS)" \
		|| $(BIN)/python -m pip install --quiet -e ".$(EXTRAS)"

run: setup
	$(BIN)/snakemake --cores $(CORES)  # with profiles/default
	$(BIN)/snakemake --report results/report.html

# One pytest-xdist worker per core; tests/conftest.py keeps the modules that share a run or a cluster on one.
test: setup
	$(BIN)/python -m pytest -n auto --dist loadscope --no-loadscope-reorder --durations=25  # the slowest tests, to keep CI well inside 30 minutes

test-fast: setup
	$(BIN)/python -m pytest -n auto --dist loadscope --no-loadscope-reorder -m "not workflow"

bench: setup
	$(BIN)/python -m bench

clean:
	rm -rf results logs benchmarks .snakemake .crosslayer
