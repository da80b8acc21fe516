//===- VectorWidth.cpp - Which vector width the CPU kernels run -----------===//
#include "runtime/cpu/VectorWidth.h"

#include "runtime/cpu/PointwiseVector.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace pax::runtime::cpu {
namespace {

/// Whether the sixteen-lane kernels can run here at all.
bool wideAvailable() {
#if defined(PAX_WIDE_VECTORS) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")))
    return false;
  const char *lanes = std::getenv("PAX_VECTOR_LANES");
  return !lanes || std::strcmp(lanes, "4") != 0;
#else
  return false;
#endif
}

/// -1: not yet asked; 0 or 1.
std::atomic<int> wide{-1};

} // namespace

bool wideVectors() {
  int w = wide.load(std::memory_order_relaxed);
  if (w < 0) {
    w = wideAvailable() ? 1 : 0;
    wide.store(w, std::memory_order_relaxed);
  }
  return w == 1;
}

void expWeightsFour(float *x, int64_t nb, float m, double &sum) {
  expWeightsOf<V4>(x, 0, nb, m, sum);
}

void setWideVectors(bool on) {
  wide.store(on && wideAvailable() ? 1 : 0, std::memory_order_relaxed);
}

} // namespace pax::runtime::cpu
