#!/usr/bin/env bash
# Rebuilds the PyTorch ONNX export corpus test/models/torch (models, test data,
# manifest.json) with tools/models/export_torch.py, in its own virtual
# environment holding the pinned versions of tools/models/export_requirements.txt.
#
#   tools/models/export_torch.sh [export_torch.py options, e.g. --only gpt2_sdpa]
#
# The venv is build/export-venv, or $PAX_EXPORT_VENV; it is created and
# filled on the first run (several GB: torch from PyPI).  Set PAX_EXPORT_PYTHON
# to pick the interpreter that creates it (default python3; the corpus was
# made with Python 3.11).  The test suite never needs torch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${PAX_EXPORT_VENV:-$root/build/export-venv}"
req="$root/tools/models/export_requirements.txt"
py="${PAX_EXPORT_PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "export_torch.sh: creating $venv" >&2
  "$py" -m venv "$venv"
fi
stamp="$venv/.export_requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  "$venv/bin/python" -m pip install --upgrade pip >&2
  "$venv/bin/python" -m pip install -r "$req" >&2
  echo "$want" > "$stamp"
fi
exec "$venv/bin/python" "$root/tools/models/export_torch.py" \
  --out "$root/test/models/torch" "$@"
