#!/usr/bin/env bash
# The virtual environment of the independent training reference
# (test/models/ort_train_reference.py): onnxruntime-training, onnx and numpy
# at the versions pinned in tools/dev/ortrain_requirements.txt, from PyPI.
#
#   tools/dev/ortrain_env.sh      prints the venv's python
#
# The venv is build/ortrain-venv, or $PAX_ORTRAIN_VENV; lit looks there too
# (the `ortrain` feature and %ortrain-python). It is filled on the first run
# (about 1 GB) and again only when the pinned requirements change: a stamp
# holds their hash, so a filled venv costs nothing. Set PAX_ORTRAIN_PYTHON
# to pick the interpreter that creates it (default python3; onnxruntime-
# training 1.19.2 has wheels for Python 3.8 to 3.12).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${PAX_ORTRAIN_VENV:-$root/build/ortrain-venv}"
req="$root/tools/dev/ortrain_requirements.txt"
py="${PAX_ORTRAIN_PYTHON:-python3}"
stamp="$venv/.ortrain_requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  rm -f "$stamp"
  if [ ! -x "$venv/bin/python" ]; then
    echo "ortrain_env.sh: creating $venv" >&2
    "$py" -m venv "$venv" >&2
  fi
  echo "ortrain_env.sh: installing $(grep -v '^#' "$req" | xargs)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
  (cd / && "$venv/bin/python" -c \
    "import onnx, numpy; from onnxruntime.capi._pybind_state import GradientGraphBuilder") >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
