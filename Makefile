# Two commands do all the set-up on a fresh machine with only Python and pip:
#   make demo   - install everything needed and run the demo pipeline with its self-check
#   make test   - install everything needed and run the full test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.zephon-installed
PACKAGES := $(sort $(dir $(wildcard plugins/*/pyproject.toml contrib/*/pyproject.toml)))

.PHONY: demo test lint bench install clean

$(STAMP): pyproject.toml requirements-dev.txt $(wildcard plugins/*/pyproject.toml contrib/*/pyproject.toml) .ci/install.sh
	PYTHON=$(PYTHON) VENV=$(VENV) sh .ci/install.sh
	touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/zephon demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/pip install -q grain
	$(BIN)/python benchmarks/bench_kernel.py

clean:
	rm -rf $(VENV)
	$(BIN)/mypy
.PHONY: typecheck docs

# mypy --strict over the kernel (settings in pyproject.toml, [tool.mypy]).
typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (mkdocs.yml) into site/; tests/test_docs_site.py builds it with --strict.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

