//===- Kernels.h - The CPU kernels behind one entry point ------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_KERNELS_H
#define PAX_RUNTIME_CPU_KERNELS_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace pax::runtime {

/// Executes \p c on the CPU. Kinds with a specific kernel run it (matmul,
/// gemm, conv, max_pool, average_pool, lrn, batch_norm, instance_norm,
/// layer_norm, rms_norm, softmax, log_softmax, lstm); every other kind goes to
/// runGeneric. The contract is runGeneric's: \p inputs and \p outputs follow
/// `c.inputs` and `c.outputs`, outputs already have their dtype and shape,
/// and each output element is computed in a fixed order, so results do not
/// depend on the thread count.
llvm::Error runKernel(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs);

} // namespace pax::runtime

#endif // PAX_RUNTIME_CPU_KERNELS_H
