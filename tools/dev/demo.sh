#!/usr/bin/env bash
# The main job on bundled real models: set up and build; import ResNet50 and
# print its summary; search how to split it over 32 GPUs and print the
# report; compile SqueezeNet (seeded random weights) to a plan, run it on
# the CPU, and verify it against onnxruntime.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/tools/dev/setup.sh"
bin=$root/build/bin
models=$root/test/models/onnx-light
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== import"
"$bin/paxc" "$models/light_resnet50.onnx" --emit=summary
echo
echo "== strategy for 32 GPUs (4 DGX A100 nodes), batch 64, training"
"$bin/paxc" "$models/light_resnet50.onnx" --batch=64 --gpus=32 --cluster=dgx-a100
echo
echo "== plan, run and verify (SqueezeNet, random weights, one device)"
python3 "$root/test/models/randomize_weights.py" "$models/light_squeezenet.onnx" "$work" --seed 1
"$bin/paxc" "$work/model.onnx" -o "$work/model.paxplan" --quiet
"$bin/paxrun" "$work/model.paxplan" --inputs "$work/in" --outputs "$work/pax"
python3 "$root/test/models/randomize_weights.py" "$work" --compare
