//===- Attention.h - Attention and its gradients ---------------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_ATTENTION_H
#define PAX_RUNTIME_CPU_ATTENTION_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/AttentionMath.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace pax::runtime::cpu {

/// Checks an `attention`, `attention_grad_q` or `attention_grad_kv`
/// compute against its tensors and describes it as plain data
/// (AttentionMath.h), its maps compiled: what the CPU kernel and the CUDA
/// kernel both run. Operands: Q, K, V, then (gradients) dO, the rows'
/// log-sum-exp and D, then the masks; iteration dims [batch..., q, k]
/// (dK, dV: [batch..., k, q]).
llvm::Expected<attention::Problem>
prepareAttention(const plan::Compute &c, llvm::ArrayRef<const Tensor *> ins,
                 llvm::ArrayRef<Tensor *> outs);

/// Runs an attention compute (or a gradient) on the CPU: tiles of
/// attention::kTile rows in parallel, each walked in order, so results do
/// not depend on the thread count.
llvm::Error runAttention(const plan::Compute &c,
                         llvm::ArrayRef<const Tensor *> ins,
                         llvm::ArrayRef<Tensor *> outs);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_ATTENTION_H
