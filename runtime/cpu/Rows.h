//===- Rows.h - f32 fast paths of the row-wise kernels ---------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_ROWS_H
#define PAX_RUNTIME_CPU_ROWS_H

#include "runtime/cpu/KernelContext.h"

namespace pax::runtime::cpu {

/// The normalizations that runRowsF32 handles.
enum class RowOp { LayerNorm, RmsNorm, InstanceNorm, Softmax, LogSoftmax };

/// Runs \p op over the inner dims of every outer point of \p p (a row) when
/// every tensor is f32, every map linear and each map steps evenly through
/// a row. A norm's statistics are summed in double in the row's order and
/// every value is computed as the generic kernel computes it, so the
/// results are its; softmax's exponentials are VectorMath.h's fastExp in
/// f32 (a few ulp from the generic kernel's) summed in double. Returns
/// false, having written nothing, otherwise.
bool runRowsF32(const Prepared &p, RowOp op, double epsilon);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_ROWS_H
