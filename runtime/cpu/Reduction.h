//===- Reduction.h - Reductions of the generic kernel ----------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_REDUCTION_H
#define PAX_RUNTIME_CPU_REDUCTION_H

#include "runtime/ReduceMath.h"
#include "runtime/cpu/KernelContext.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace pax::runtime::cpu {

using runtime::ReduceOp;

/// The reduction of kind \p kind (`"reduce_sum"`, `"arg_max"`), if it is one.
std::optional<ReduceOp> parseReduceOp(llvm::StringRef kind);

/// Reduces the one input over the inner (`red`) dims of each outer point,
/// in row-major order of those dims; arg_max / arg_min return that
/// row-major position (the index along the axis for one reduced dim).
llvm::Error runReduction(const Prepared &p, ReduceOp op);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_REDUCTION_H
