#!/usr/bin/env bash
# The whole test suite: set up, build, run every unit and lit test with ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/tools/dev/setup.sh"
cd "$root/build"
ctest --output-on-failure -j2
