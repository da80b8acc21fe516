#!/usr/bin/env bash
# Runs on a GPU machine, from the repository's root, with the bundle of
# tools/dev/gpu_bundle.sh beside it (gpu-bundle/, or give its path):
#
#   tools/dev/gpu_check.sh [BUNDLE]
#
# Prints what the machine has (GPU, driver, the CUDA libraries the bundle
# will load), checks that the bundled paxc and paxrun start and run a
# small model on the CPU backend, then runs an MLP, GPT-2, Llama, BERT and
# an LSTM LM on the CUDA backend as 1, 2, 4 and 8 virtual devices of the
# GPU, a wider GPT-2 (rows longer than a thread block), and the light CNNs
# on 1 and 4 (three of them also compiled --channels-last), each verified
# against the CPU reference; checks that 3
# training steps of the GPT-2s on 1 and 2 leave the CPU's weights; runs
# three language models and ResNet-50 in bf16, GPT-2 in fp16 (--precision) within
# 1e-2 of the same plan on the CPU; and profiles a GPT-2 run per kernel.
# Needs the machine's python3 with onnx and numpy (the models are made
# there). Exits non-zero when a step that must work fails.
# PAX_GPU_CHECK_COUNTS sets the virtual device counts of the language
# models (default "1 2 4 8"); PAX_GPU_CHECK_CNNS=0 skips the CNNs.
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

echo "== the CUDA backend: every plan checked against the CPU reference (--verify)"
gen="python3 $root/tools/models/paxmodels.py"
python3 "$root/test/lit/passes/Inputs/grad_models.py" mlp "$work/mlp.onnx" || exit 1
$gen gpt2 --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 256 --positions 64 --batch 8 --seq 32 --weights random -o "$work/gpt2.onnx" || exit 1
$gen llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 256 --batch 8 --seq 32 --weights random -o "$work/llama.onnx" || exit 1
$gen bert --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 256 --positions 64 --batch 8 --seq 32 --weights random -o "$work/bert.onnx" || exit 1
$gen lstm --layers 2 --hidden 64 --vocab 256 --batch 8 --seq 32 --weights random -o "$work/lstm.onnx" || exit 1
failed=0
# check NAME MODEL N INPUTS...: compiles MODEL for N devices and runs it on
# the CUDA backend with --verify (the CPU reference); prints its verdict.
# PAXC_FLAGS and PAXRUN_FLAGS (arrays, default empty) add flags.
PAXC_FLAGS=()
PAXRUN_FLAGS=()
check() {
  local name=$1 model=$2 n=$3 plan out
  shift 3
  plan="$work/$name.$n.paxplan"
  paxc "$model" --gpus="$n" "${PAXC_FLAGS[@]}" -o "$plan" --quiet || exit 1
  if out=$(paxrun "$plan" "$@" --backend=cuda --verify --comm-stats "${PAXRUN_FLAGS[@]}" 2>&1); then
    echo "$name on $n virtual device(s): $(echo "$out" | grep -m1 '^verify:')"
  else
    echo "$name on $n virtual device(s): FAILED"; echo "$out" | tail -5; failed=1
  fi
}
for m in mlp gpt2 llama bert lstm; do
  inputs=(--random-inputs)
  if [ "$m" != mlp ]; then
    python3 "$root/test/models/make_test_data.py" "$work/$m.onnx" "$work/$m" --seed 6 >/dev/null || exit 1
    inputs=(--inputs "$work/$m/in")
  fi
  for n in ${PAX_GPU_CHECK_COUNTS:-1 2 4 8}; do
    check "$m" "$work/$m.onnx" "$n" "${inputs[@]}"
  done
done
echo "== wide rows (softmax over 300 positions, norms over 512): the row kernels' blocks loop"
$gen gpt2 --layers 1 --hidden 512 --heads 4 --ffn 1024 --vocab 256 --positions 320 --batch 2 --seq 300 --weights random -o "$work/wide.onnx" || exit 1
for n in 1 2; do
  check wide-gpt2 "$work/wide.onnx" "$n" --random-inputs
done
echo "== training steps (attention and its gradients over tiles): weights after 3 SGD steps equal the CPU's"
# train_check NAME MODEL N: compiles a training plan of MODEL for N
# devices, runs 3 steps on the CPU and on the CUDA backend from the same
# data, and compares the weights they save.
train_check() {
  local name=$1 model=$2 n=$3 plan data out
  data="$work/$name.train"
  plan="$work/$name.$n.train.paxplan"
  [ -d "$data" ] || python3 "$root/test/models/make_test_data.py" "$model" "$data" --seed 3 --loss cross-entropy >/dev/null || exit 1
  paxc "$model" --mode=train --loss=cross-entropy --optimizer=sgd --gpus="$n" -o "$plan" --quiet || exit 1
  paxrun "$plan" --train --steps=3 --data="$data/in" --save="$work/$name.$n.cpu.onnx" >/dev/null || exit 1
  if paxrun "$plan" --train --steps=3 --data="$data/in" --save="$work/$name.$n.gpu.onnx" --backend=cuda >/dev/null 2>"$work/train.err" &&
    out=$(python3 "$root/test/models/same_weights.py" "$work/$name.$n.cpu.onnx" "$work/$name.$n.gpu.onnx" --tol 1e-5 2>&1); then
    echo "$name training on $n virtual device(s): $out"
  else
    echo "$name training on $n virtual device(s): FAILED"; echo "$out"; tail -5 "$work/train.err"; failed=1
  fi
}
for n in 1 2; do
  train_check gpt2 "$work/gpt2.onnx" "$n"
  train_check wide-gpt2 "$work/wide.onnx" "$n"
done
echo "== mixed precision (bf16, fp16: cuBLAS with fp32 accumulation) on 1 and 4 virtual devices, against the same plan on the CPU"
PAXRUN_FLAGS=(--tolerance=1e-2)
for pm in bf16:gpt2 bf16:bert bf16:llama fp16:gpt2; do
  p=${pm%%:*} m=${pm#*:}
  PAXC_FLAGS=(--precision=$p)
  for n in 1 4; do
    check "$p-$m" "$work/$m.onnx" "$n" --inputs "$work/$m/in"
  done
done
PAXC_FLAGS=(--precision=bf16)
check bf16-resnet50 "$root/test/models/onnx-light/light_resnet50.onnx" 1 --random-inputs
PAXC_FLAGS=()
PAXRUN_FLAGS=()
echo "== CNNs (convolutions on cuDNN) on 1 and 4 virtual devices"
[ "${PAX_GPU_CHECK_CNNS:-1}" = 0 ] && echo "(skipped: PAX_GPU_CHECK_CNNS=0)"
for m in "$root"/test/models/onnx-light/*.onnx; do
  [ "${PAX_GPU_CHECK_CNNS:-1}" = 0 ] && break
  for n in 1 4; do
    check "$(basename "$m" .onnx)" "$m" "$n" --random-inputs
  done
done
echo "== channels-last CNNs (cuDNN on NHWC activations) on 1 and 4 virtual devices"
PAXC_FLAGS=(--channels-last)
for m in resnet50 inception_v1 shufflenet; do
  [ "${PAX_GPU_CHECK_CNNS:-1}" = 0 ] && break
  for n in 1 4; do
    check "nhwc-$m" "$root/test/models/onnx-light/light_$m.onnx" "$n" --random-inputs
  done
done
PAXC_FLAGS=()
echo "== kernels of a GPT-2 step on one device"
paxrun "$work/gpt2.1.paxplan" --inputs "$work/gpt2/in" --backend=cuda --repeat=3 --profile=kernel --time || failed=1
exit $failed
