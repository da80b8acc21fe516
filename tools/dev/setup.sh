#!/usr/bin/env bash
# Installs what paxc needs (Debian and Python packages) and builds it.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#   tools/dev/setup.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}

apt_packages=(cmake ninja-build ccache g++ pkg-config python3 python3-pip
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  llvm-19-dev llvm-19-tools libzstd-dev libtbb-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev time
  clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The tests' references, the Python module's binding library (pybind11,
# found by CMake) and its test runner.
python_packages=(onnx onnxruntime numpy pybind11 pytest)
if ! python3 -c "import onnx, onnxruntime, numpy, pybind11, pytest" 2>/dev/null; then
  echo "setup: installing ${python_packages[*]}"
  python3 -m pip install -q "${python_packages[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${python_packages[@]}"
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# A build configured before pybind11 was installed finds it now.
if ! grep -q "paxc_python" "$build/build.ninja"; then
  cmake "$build" >/dev/null
fi
ninja -C "$build" >/dev/null
echo "setup: paxc is built in $build (the Python module: PYTHONPATH=$build/python)"
