//===- Kernels.h - The CPU kernels behind one entry point ------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_KERNELS_H
#define PAX_RUNTIME_CPU_KERNELS_H

#include "codegen/plan/Plan.pb.h"
#include "runtime/PaddedWindow.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace pax::runtime {
namespace cpu {
class DnnlCache;
} // namespace cpu

/// Executes \p c on the CPU. Kinds with a specific kernel run it (matmul,
/// gemm, conv, max_pool, average_pool, lrn, batch_norm, instance_norm,
/// layer_norm, rms_norm, softmax, log_softmax, lstm); every other kind goes to
/// runGeneric. On f32 tensors whose maps allow it, fast paths run instead:
/// the blocked GEMM for matmul, gemm and 2-D conv (cpu/Gemm.h,
/// cpu/Window2D.h), vectorized elementwise ops and batch norm
/// (cpu/Pointwise.h), row-wise norms and softmax (cpu/Rows.h), 2-D max pool.
/// The contract is runGeneric's: \p inputs and \p outputs follow `c.inputs`
/// and `c.outputs`, outputs already have their dtype and shape, and each
/// output element is computed in a fixed order, so results do not depend on
/// the thread count.
llvm::Error runKernel(const plan::Compute &c,
                      llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs);
/// runKernel on a device that keeps its oneDNN primitives and packed
/// weights in \p primitives (cpu/DnnlCache.h).
llvm::Error runDeviceKernel(const plan::Compute &c,
                            llvm::ArrayRef<const Tensor *> inputs,
                            llvm::ArrayRef<Tensor *> outputs,
                            cpu::DnnlCache &primitives);

/// The padded spatial dims of pool \p c's input of \p shape (its `pads`),
/// for count_include_pad.
llvm::Error paddedWindow(const plan::Compute &c, llvm::ArrayRef<int64_t> shape,
                         PaddedWindow &window);

/// True when runKernel has a kernel for computes of \p kind (`"matmul"`).
/// Plans are checked against it when they are compiled, so a plan never
/// holds a compute the CPU backend cannot run.
bool hasKernel(llvm::StringRef kind);

} // namespace pax::runtime

#endif // PAX_RUNTIME_CPU_KERNELS_H
