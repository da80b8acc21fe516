#!/usr/bin/env bash
# Formats the C++ files changed against a revision (default: HEAD) with
# clang-format, and with --tidy also runs clang-tidy on them.
#   tools/dev/format.sh [--tidy] [REV]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
tidy=0
if [ "${1:-}" = "--tidy" ]; then tidy=1; shift; fi
rev=${1:-HEAD}
mapfile -t files < <({ git diff --name-only --diff-filter=ACMR "$rev"; git ls-files --others --exclude-standard; } |
  grep -E '\.(h|cpp|cu)$' | sort -u)
[ ${#files[@]} -eq 0 ] && { echo "format: no changed C++ files"; exit 0; }
clang-format -i "${files[@]}"
echo "format: formatted ${#files[@]} files"
if [ $tidy -eq 1 ]; then
  clang-tidy -p build --quiet "${files[@]}"
fi
