#!/usr/bin/env bash
# Runs on a GPU machine, from the repository's root, with the bundle of
# tools/dev/gpu_bundle.sh beside it (gpu-bundle/, or give its path):
#
#   tools/dev/gpu_check.sh [BUNDLE]
#
# Prints what the machine has (GPU, driver, the CUDA libraries the bundle
# will load), checks that the bundled paxc and paxrun start and run a
# small model on the CPU backend, and asks the CUDA backend for its device.
# Exits non-zero when a step that must work fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="${1:-$root/gpu-bundle}"
if [ ! -f "$bundle/env.sh" ]; then
  echo "gpu_check: no bundle at $bundle (build it with tools/dev/gpu_bundle.sh)" >&2
  exit 2
fi
# shellcheck disable=SC1091
source "$bundle/env.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || true
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "== libraries paxrun loads"
ldd "$bundle/bin/paxrun" | awk '{print "  " $1, $2, $3}'
if ldd "$bundle/bin/paxrun" | grep -q "not found"; then
  echo "gpu_check: paxrun cannot load all its libraries" >&2
  exit 1
fi

echo "== a small model on the CPU backend, 2 devices, verified"
model="$root/test/models/onnx-light/light_squeezenet.onnx"
paxc "$model" --batch=2 --gpus=2 -o "$work/s.paxplan" --quiet || exit 1
paxrun "$work/s.paxplan" --random-inputs --verify || exit 1

echo "== the CUDA backend"
paxrun "$work/s.paxplan" --random-inputs --backend=cuda
echo "gpu_check: paxrun --backend=cuda exited $? (expected for now: the CUDA backend has no kernels yet)"
