//===- PointwiseWide.cpp - The vectorized kernels on sixteen lanes --------===//
//
// Compiled for AVX-512 where the compiler can (runtime/CMakeLists.txt
// defines PAX_WIDE_VECTORS then); run only where the processor has it
// (VectorWidth.h). Everything here is internal to this file but the two
// entry points, so no function compiled for AVX-512 stands in for one
// that other files call on any x86-64.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VectorWidth.h"

#ifdef PAX_WIDE_VECTORS
#include "runtime/cpu/PointwiseVector.h"
#endif

namespace pax::runtime::cpu {

#ifdef PAX_WIDE_VECTORS
bool applyVectorWide(ScalarOp op, const ScalarParams &params,
                     const float *const *a, size_t na, float *o, int64_t n) {
  return applyVectorOf<V16>(op, params, a, na, o, n);
}

bool expWeightsWide(float *x, int64_t nb, float m, double &sum) {
  expWeightsOf<V16>(x, 0, nb, m, sum);
  return true;
}

bool expRowWide(const float *x, int64_t n, float mx, float *e, double part[4]) {
  expRowOf<V16>(x, 0, n, mx, e, part);
  return true;
}
#else
bool applyVectorWide(ScalarOp, const ScalarParams &, const float *const *,
                     size_t, float *, int64_t) {
  return false;
}

bool expWeightsWide(float *, int64_t, float, double &) { return false; }

bool expRowWide(const float *, int64_t, float, float *, double[4]) {
  return false;
}
#endif

} // namespace pax::runtime::cpu
