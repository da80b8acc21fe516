//===- Pointwise.h - f32 fast paths of the pointwise kernels ---*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_POINTWISE_H
#define PAX_RUNTIME_CPU_POINTWISE_H

#include "runtime/cpu/KernelContext.h"
#include "runtime/cpu/ScalarOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace pax::runtime::cpu {

/// The outer dims of a space walked as rows of runs: the innermost outer
/// dims merge into one run while every map steps through them evenly, so
/// that a contiguous tensor is one run however many dims it has.
struct RunPlan {
  int64_t length = 1;                     // points per run
  int64_t rows = 1;                       // runs
  llvm::SmallVector<unsigned, 8> rowDims; // outer dims not merged, in order
  llvm::SmallVector<int64_t, 8> steps;    // per map: its step along a run

  /// The runs of \p dims (dims of \p s, outermost first) for \p maps, all
  /// linear.
  static RunPlan of(const IterationSpace &s, llvm::ArrayRef<unsigned> dims,
                    llvm::ArrayRef<const AccessIndexer *> maps);
};

/// Calls \p fn in parallel for pieces of the runs of \p plan (over the
/// outer dims of \p s): `starts[m]`
/// is where map m's piece begins and \p count its length.
void forEachRunPiece(
    const IterationSpace &s, const RunPlan &plan,
    llvm::ArrayRef<const AccessIndexer *> maps,
    llvm::function_ref<void(llvm::ArrayRef<int64_t> starts, int64_t count)> fn);

/// Computes \p n points of elementwise \p op from \p args (one pointer
/// per operand, \p n values each) into \p out, as runElementwiseF32
/// computes each point.
void applyElementwise(ScalarOp op, const ScalarParams &params,
                      llvm::ArrayRef<const float *> args, float *out,
                      int64_t n);

/// Runs elementwise \p op when every tensor is f32 (where's condition may
/// be bool), every map linear and there is one output: the common ops on
/// four lanes at a time, the others through applyReal, as the generic
/// kernel does. Only erf, gelu, exp, tanh and sigmoid differ from the
/// generic kernel, by VectorMath.h's approximations (erf at most 5e-7 from
/// it, the others a few ulp). Returns false, having written nothing,
/// otherwise.
bool runElementwiseF32(const Prepared &p, ScalarOp op,
                       const ScalarParams &params);

/// Runs inference batch norm as y = x * a + b with a = scale / sqrt(var +
/// epsilon) and b = bias - mean * a per channel, when every tensor is f32,
/// every map linear and the four parameters share one map. Returns false,
/// having written nothing, otherwise.
bool runBatchNormF32(const Prepared &p, double epsilon);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_POINTWISE_H
