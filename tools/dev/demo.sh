#!/usr/bin/env bash
# The main job on bundled real models: set up and build; import ResNet50 and
# print its summary; search how to split it over 32 GPUs and print the
# report; then compile it for 8 devices, run the plan on 8 simulated
# devices (threads of one process), verify it against the unpartitioned
# model, and check it against onnxruntime.
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
"$bin/paxc" "$models/light_resnet50.onnx" --batch=64 --gpus=32 --cluster=dgx-a100 --mode=train
echo
echo "== plan for 8 GPUs (a DGX-1), batch 8, inference: report, run on 8 simulated devices, verify"
python3 "$root/test/models/randomize_weights.py" "$models/light_resnet50.onnx" "$work" --seed 1
"$bin/paxc" "$work/model.onnx" --batch=8 --gpus=8 --cluster=dgx1-p100 --mode=infer --emit=report
"$bin/paxc" "$work/model.onnx" --batch=8 --gpus=8 --cluster=dgx1-p100 -o "$work/b8.paxplan"
"$bin/paxrun" "$work/b8.paxplan" --random-inputs --verify
echo
echo "== the same model at batch 1, channels and rows split over 8 devices (expert), against onnxruntime"
"$bin/paxc" "$work/model.onnx" --gpus=8 --cluster=dgx1-p100 --solver=expert -o "$work/b1.paxplan"
"$bin/paxrun" "$work/b1.paxplan" --inputs "$work/in" --outputs "$work/pax" --comm-stats | tail -1
python3 "$root/test/models/randomize_weights.py" "$work" --compare
