#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan and UBSan, in build-fuzz/) and
# runs each for SECONDS on its corpus, seeded from the test data.
#
#   tools/dev/fuzz.sh [SECONDS] [HARNESS...]     default: 60 s, every harness
#
# Harnesses: onnx onnx-text plan strategy tensor npy checkpoint json.
# Corpora grow in build-fuzz/corpus/NAME; findings (crash-*, leak-*,
# timeout-*, oom-*) land in build-fuzz/findings/NAME; each run's last
# stats line (executions, coverage, exec/s) goes to build-fuzz/fuzz.log.
# Exits non-zero when any harness found something: add the input to
# test/fuzz/regressions/NAME/ with the fix. PAX_FUZZ_SEED=N fixes the
# fuzzers' seed (tools/dev/test.sh uses 1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${1:-60}
shift || true
all=(onnx onnx-text plan strategy tensor npy checkpoint json)
harnesses=("${@:-${all[@]}}")
[ $# -eq 0 ] && harnesses=("${all[@]}")
out=$root/build-fuzz
if [ ! -f "$out/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$out" -G Ninja -DPAX_FUZZ=ON \
    -DPAX_ENABLE_CUDA=OFF -DPAX_ENABLE_MPI=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$out" $(printf 'fuzz-%s ' "${harnesses[@]}") >/dev/null

# Seeds: what the tests already hold, per kind of file.
seed() { # NAME FILES...
  local dir=$out/corpus/$1
  shift
  mkdir -p "$dir"
  for f in "$@"; do
    [ -f "$f" ] && cp -n "$f" "$dir/$(echo "$f" | md5sum | cut -c1-16)-$(basename "$f")" 2>/dev/null || true
  done
}
# Binary models: the lit tests' text models converted (small and varied:
# big models would make each execution slow), and the error tests' inputs.
mkdir -p "$out/corpus/onnx"
python3 - "$out/corpus/onnx" "$root"/test/lit/frontend/*.onnxtxt \
  "$root"/test/lit/errors/*.onnxtxt <<'PY' 2>/dev/null || true
import sys, os
from google.protobuf import text_format
import onnx
for path in sys.argv[2:]:
    try:
        m = text_format.Parse(open(path).read(), onnx.ModelProto())
    except Exception:
        continue
    name = os.path.basename(path).replace(".onnxtxt", ".onnx")
    open(os.path.join(sys.argv[1], name), "wb").write(m.SerializeToString())
PY
seed onnx "$root"/test/lit/errors/Inputs/*.onnx
seed onnx-text "$root"/test/lit/frontend/*.onnxtxt "$root"/test/lit/errors/*.onnxtxt
seed tensor "$root"/test/models/onnx-light/*_output_0.pb \
  "$root"/test/models/torch/{gpt2_eager,resnet,lstm_lm,bert_eager}_ts/test_data_set_0/*.pb
seed npy "$root"/test/fuzz/seeds/npy/*
seed json "$root"/test/models/clusters/*.json "$root"/test/fuzz/seeds/json/*
seed strategy "$root"/test/fuzz/seeds/strategy/*
seed checkpoint "$root"/test/fuzz/seeds/checkpoint/*
seed plan "$root"/test/fuzz/seeds/plan/*
for h in "${harnesses[@]}"; do
  seed "$h" "$root"/test/fuzz/regressions/"$h"/* 2>/dev/null
done

status=0
for h in "${harnesses[@]}"; do
  mkdir -p "$out/findings/$h"
  dict=()
  [ -f "$root/test/fuzz/dicts/$h.dict" ] && dict=(-dict="$root/test/fuzz/dicts/$h.dict")
  log=$out/findings/$h/run.log
  set +e
  seedopt=()
  [ -n "${PAX_FUZZ_SEED:-}" ] && seedopt=(-seed="$PAX_FUZZ_SEED")
  # Inputs up to 64 KiB: larger ones only make each execution slower.
  UBSAN_OPTIONS=print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS} \
  "$out/bin/fuzz-$h" "$out/corpus/$h" "${dict[@]}" "${seedopt[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
    -artifact_prefix="$out/findings/$h/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  rate=$(grep -E 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
  echo "$(date -u +%F) $h: ${seconds}s, ${execs:-?} executions, ${rate:-?}/s, exit $rc: $stats" | tee -a "$out/fuzz.log"
  if [ $rc -ne 0 ]; then
    status=1
    # The report and its first frames: where, not only what.
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written|^ +#[0-9]+ 0x' "$log" | head -24
  fi
done
exit $status
