//===- VectorWidth.h - Which vector width the CPU kernels run ---*- C++ -*-===//
//
// paxc builds for any x86-64, whose vectors are four floats wide. Where the
// compiler can target AVX-512, the hottest vectorized kernels are also
// built for sixteen lanes (cpu/PointwiseWide.cpp) and run where the
// processor has AVX-512 (F, DQ, BW, VL), picked when the process first
// asks. Every lane computes what a four-lane one does, so results do not
// depend on the width. `PAX_VECTOR_LANES=4` in the environment keeps the
// four-lane kernels.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_VECTORWIDTH_H
#define PAX_RUNTIME_CPU_VECTORWIDTH_H

#include "runtime/ScalarMath.h"

#include <cstddef>
#include <cstdint>

namespace pax::runtime::cpu {

/// Whether the sixteen-lane kernels run: built, the processor has
/// AVX-512, and neither PAX_VECTOR_LANES=4 nor setWideVectors(false) says
/// otherwise.
bool wideVectors();

/// Turns the sixteen-lane kernels off (false) or back on where they can run
/// (true); for tests that compare the widths.
void setWideVectors(bool on);

/// The elementwise fast paths (cpu/Pointwise.h) on sixteen lanes: \p na
/// operands \p a, \p n points into \p o. False for the ops without one, or
/// where the sixteen-lane kernels are not built.
bool applyVectorWide(ScalarOp op, const ScalarParams &params,
                     const float *const *a, size_t na, float *o, int64_t n);

/// Attention's softmax weights (cpu/Attention.cpp): each of \p nb scores
/// \p x becomes exp(x - m) in place (0 for NaN, +inf and x - m below -87),
/// four lanes summed in order into the returned sum at a time. Returns
/// false, having done nothing, where the sixteen-lane kernels are not
/// built.
bool expWeightsWide(float *x, int64_t nb, float m, double &sum);

/// A softmax row's exponentials e^(x - mx) of the first \p n points (a
/// multiple of sixteen) of \p x into \p e, point j's added to part[j % 4]
/// in order (cpu/Rows.cpp). False, having done nothing, where the
/// sixteen-lane kernels are not built.
bool expRowWide(const float *x, int64_t n, float mx, float *e, double part[4]);

/// expWeightsWide on four lanes, for the points a sixteen-lane vector does
/// not fill (and tests); \p nb a multiple of four.
void expWeightsFour(float *x, int64_t nb, float m, double &sum);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_VECTORWIDTH_H
