//===- GenericKernel.h - Runs a compute through its maps -------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_GENERICKERNEL_H
#define PAX_RUNTIME_CPU_GENERICKERNEL_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace pax::runtime {

/// Executes \p c on the CPU by walking its iteration space and reading and
/// writing through its access maps: elementwise ops, data movement
/// (reshape, transpose, concat, split, slice, expand, pad, tile), gather and
/// reductions (reduce_*, arg_max, arg_min). \p inputs and \p outputs follow
/// the order of `c.inputs` and `c.outputs`; outputs must already have their
/// dtype and shape (their contents are overwritten where the maps write).
///
/// Parallel dims run in parallel with TBB; `red` and `seq` dims run in order
/// inside each parallel point, so results do not depend on the thread count.
/// Float tensors compute in double, integer tensors in int64 (integer
/// division truncates toward zero); values convert to the output dtype on
/// store. A kind it does not handle, or a map it cannot walk (`*`), is an
/// error naming it.
llvm::Error runGeneric(const plan::Compute &c,
                       llvm::ArrayRef<const Tensor *> inputs,
                       llvm::ArrayRef<Tensor *> outputs);

/// True when runGeneric handles computes of \p kind.
bool genericHasKernel(llvm::StringRef kind);

} // namespace pax::runtime

#endif // PAX_RUNTIME_CPU_GENERICKERNEL_H
