#!/usr/bin/env bash
# The whole test suite: set up and build, run every unit and lit test with
# ctest, then run the same suite again in a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/; PAX_SANITIZE=0 skips it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$root/tools/dev/setup.sh"
# The onnxruntime-training reference's venv (lit's "ortrain" tests), made
# once from PyPI and reused; both builds' lit runs find it through
# PAX_ORTRAIN_VENV.
export PAX_ORTRAIN_VENV=${PAX_ORTRAIN_VENV:-$root/build/ortrain-venv}
"$root/tools/dev/ortrain_env.sh" >/dev/null
(cd "$root/build" && ctest --output-on-failure -j2 -LE long)

if [ "${PAX_SANITIZE:-1}" != 0 ]; then
  asan=$root/build-asan
  if [ ! -f "$asan/build.ninja" ]; then
    cmake -S "$root" -B "$asan" -G Ninja -DPAX_SANITIZE=ON \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
  fi
  ninja -C "$asan" >/dev/null
  echo "test: the same suite under AddressSanitizer and UndefinedBehaviorSanitizer"
  (cd "$asan" && ctest --output-on-failure -j2 -LE long)
fi

# Every fuzz harness for about a minute on its corpus (seeded from the test
# data, fixed seed), so the harnesses keep building and finding nothing
# (PAX_FUZZ_SECONDS=0 skips it; tools/dev/fuzz.sh runs them for longer).
if [ "${PAX_FUZZ_SECONDS:-60}" != 0 ]; then
  echo "test: each fuzz harness for ${PAX_FUZZ_SECONDS:-60} s"
  PAX_FUZZ_SEED=1 "$root/tools/dev/fuzz.sh" "${PAX_FUZZ_SECONDS:-60}"
fi
