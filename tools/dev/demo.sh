#!/usr/bin/env bash
# The main job on a bundled real model: set up, build, import ResNet50 and
# print its summary.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/tools/dev/setup.sh"
"$root/build/bin/paxc" "$root/test/models/onnx-light/light_resnet50.onnx" --emit=summary
