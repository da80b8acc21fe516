#!/usr/bin/env bash
# Everything the GPU machine is for, in one go, logs written to OUT:
#
#   tools/dev/gpu_all.sh OUT [BUNDLE]
#
# OUT/check.log: tools/dev/gpu_check.sh (the CUDA backend against the CPU
# reference, 1 to 8 virtual devices); OUT/bench.log and OUT/bench.json:
# bench/cuda_bench.py (ResNet-50, BERT-base, GPT-2 small against PyTorch
# eager, TF32 off; each plan also without fused kernels, --unfused),
# OUT/profiles.txt their per-kernel profiles (NAME and NAME.unfused); then the
# same bench in bf16 against PyTorch autocast where PAX_GPU_BF16=1 (OUT/bench-bf16.*,
# its own limit PAX_GPU_BF16_S), and with TF32 (OUT/bench-tf32.*) where PAX_GPU_TF32=1. Each step
# has a time limit (PAX_GPU_CHECK_S, PAX_GPU_BENCH_S, PAX_GPU_TF32_S
# seconds) so that the logs are written within a bounded time;
# PAX_GPU_REPEAT sets the bench's timed runs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: gpu_all.sh OUT [BUNDLE]}"
bundle="${2:-$root/gpu-bundle}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv 2>&1 | tee "$out/machine.txt"
timeout "${PAX_GPU_CHECK_S:-180}" "$root/tools/dev/gpu_check.sh" "$bundle" \
  2>&1 | tee "$out/check.log" || status=1
# shellcheck disable=SC1091
source "$bundle/env.sh"
prof="$(mktemp -d)"
timeout "${PAX_GPU_BENCH_S:-330}" python3 "$root/bench/cuda_bench.py" \
  --bin "$bundle/bin" --repeat "${PAX_GPU_REPEAT:-10}" \
  --json "$out/bench.json" --profile "$prof" --unfused 2>&1 | tee "$out/bench.log" ||
  status=1
for f in "$prof"/*.profile; do
  [ -f "$f" ] && { echo "== $(basename "$f" .profile)"; cat "$f"; }
done > "$out/profiles.txt"
if [ "${PAX_GPU_BF16:-0}" = 1 ]; then
  timeout "${PAX_GPU_BF16_S:-${PAX_GPU_BENCH_S:-330}}" python3 "$root/bench/cuda_bench.py" \
    --bin "$bundle/bin" --repeat "${PAX_GPU_REPEAT:-10}" --precision bf16 \
    --json "$out/bench-bf16.json" 2>&1 | tee "$out/bench-bf16.log" || status=1
fi
if [ "${PAX_GPU_TF32:-0}" = 1 ]; then
  timeout "${PAX_GPU_TF32_S:-${PAX_GPU_BENCH_S:-330}}" python3 "$root/bench/cuda_bench.py" \
    --bin "$bundle/bin" --repeat "${PAX_GPU_REPEAT:-10}" --tf32 \
    --json "$out/bench-tf32.json" 2>&1 | tee "$out/bench-tf32.log" || status=1
fi
exit $status
