#!/usr/bin/env bash
# Checks the C++ files a change touches against a revision (default: HEAD)
# with clang-tidy and .clang-tidy's checks, among them
# readability-function-size (no function over 60 lines); exits non-zero
# where a check warns. Needs the build's compile_commands.json
# (tools/dev/setup.sh makes it).
#   tools/dev/tidy.sh [REV] [--function-size]
# --function-size: only the function-size check (fast to read).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
rev=HEAD
checks=()
for a in "$@"; do
  case "$a" in
    --function-size) checks=(--checks=-*,readability-function-size) ;;
    *) rev=$a ;;
  esac
done
[ -f build/compile_commands.json ] || { echo "tidy: no build/compile_commands.json (run tools/dev/setup.sh)"; exit 2; }
mapfile -t files < <({ git diff --name-only --diff-filter=ACMR "$rev"; git ls-files --others --exclude-standard; } |
  grep -E '\.cpp$' | grep -E '^(frontend|ir|passes|codegen|runtime|tools)/' | sort -u)
[ ${#files[@]} -eq 0 ] && { echo "tidy: no changed C++ sources"; exit 0; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for f in "${files[@]}"; do
  # GCC's flags clang does not know are not the file's problem.
  clang-tidy -p build --quiet "${checks[@]}" --extra-arg=-Wno-unknown-warning-option \
    --extra-arg=-Wno-unknown-warning "$f" > "$log" 2>/dev/null || true
  if grep -q "warning:" "$log"; then
    grep -E "warning:" "$log"
    status=1
  fi
done
[ $status -eq 0 ] && echo "tidy: ${#files[@]} file(s) clean"
exit $status
