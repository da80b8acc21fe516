#!/usr/bin/env bash
# Builds a relocatable bundle of paxc and paxrun for a GPU machine that has
# CUDA's libraries (pip's nvidia-* packages, or a toolkit) but none of our
# Debian dependencies:
#
#   tools/dev/gpu_bundle.sh [OUT]        # default OUT: gpu-bundle/
#
# OUT/bin holds the stripped binaries, OUT/lib every shared library they
# need except glibc's and CUDA's own (cudart, cuBLAS, cuDNN, NCCL: those of
# the GPU machine are used), and OUT/env.sh, sourced there, puts OUT/lib
# and the CUDA libraries it finds (pip's nvidia packages under python3's
# site-packages, then /usr/local/cuda) on LD_LIBRARY_PATH. The bundle is
# built in build-bundle/ (Release, without oneDNN: the CPU backend there is
# the reference, not the benchmark, and oneDNN alone is 40 MiB) and must
# stay under 60 MiB, so that it travels with the working tree (64 MiB).
# No mpirun travels: one GPU runs one process, its devices as threads.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/gpu-bundle}"
build="$root/build-bundle"
limit_mib=60

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPAX_ENABLE_DNNL=OFF >/dev/null
ninja -C "$build" paxc paxrun >/dev/null

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for tool in paxc paxrun; do
  strip -o "$out/bin/$tool" "$build/bin/$tool"
done

# What the binaries load, but glibc (the GPU machine's own, as new or newer)
# and CUDA's libraries (the GPU machine's, matching its driver).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libcuda\.|libcudart|libcublas|libcudnn|libnccl)'
for tool in paxc paxrun; do
  ldd "$build/bin/$tool" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $skip ]]; then
    cp -L "$path" "$out/lib/$name"
    strip --strip-unneeded "$out/lib/$name" 2>/dev/null || true
  fi
done

cat > "$out/env.sh" <<'EOF'
# Source this on the GPU machine: the bundle's libraries, then CUDA's.
bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cuda_libs=""
if command -v python3 >/dev/null; then
  cuda_libs="$(python3 - <<'PY' 2>/dev/null || true
import glob, os, site
dirs = []
for base in site.getsitepackages():
    dirs += sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib")))
print(":".join(dirs))
PY
)"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && cuda_libs="$cuda_libs${cuda_libs:+:}$d"
done
export LD_LIBRARY_PATH="$bundle/lib${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$bundle/bin:$PATH"
EOF

size_kib=$(du -sk "$out" | cut -f1)
echo "gpu_bundle: $out: $((size_kib / 1024)) MiB ($(ls "$out/lib" | wc -l) libraries)"
# Every library but glibc's and CUDA's must resolve inside the bundle.
missing=$(env -i LD_LIBRARY_PATH="$out/lib" ldd "$out/bin/paxrun" "$out/bin/paxc" |
  awk '$2 == "=>" {print $1, $3}' | grep -Ev "$skip" | grep -v " $out/lib/" || true)
if [ -n "$missing" ]; then
  echo "gpu_bundle: resolved outside the bundle:" >&2
  echo "$missing" >&2
  exit 1
fi
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu_bundle: over $limit_mib MiB" >&2
  exit 1
fi
