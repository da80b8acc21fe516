//===- Widen.h - 16-bit float tensors through the f32 kernels ---*- C++ -*-===//
//
// A bf16 or fp16 plan stores its tensors in 16 bits and computes in fp32
// (the mixed precision of paxc --precision). The CPU's fast kernels are
// f32 kernels: runWidened hands them f32 copies of the 16-bit float
// tensors of a compute, and rounds each output back to its type once, at
// the end (to nearest even), which is what a kernel with 16-bit loads and
// stores and f32 math computes. A resident weight's copy is kept in the
// device's cache until its next run with other weights, as its packed
// forms are (DnnlCache.h).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CPU_WIDEN_H
#define PAX_RUNTIME_CPU_WIDEN_H

#include "runtime/Backend.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

namespace pax::runtime::cpu {

class DnnlCache;

/// Whether any of \p inputs and \p outputs is a 16-bit float tensor.
bool holds16BitFloats(llvm::ArrayRef<const Tensor *> inputs,
                      llvm::ArrayRef<Tensor *> outputs);

/// \p from's values as f32 (F16, BF16 only).
Tensor widenToF32(const Tensor &from);
/// Stores f32 \p wide into \p to (F16, BF16; same element count), rounded
/// to nearest even.
void narrowFromF32(const Tensor &wide, Tensor &to);

using KernelOnTensors = llvm::function_ref<llvm::Error(
    llvm::ArrayRef<const Tensor *>, llvm::ArrayRef<Tensor *>)>;

/// Runs \p run on \p inputs and \p outputs with every 16-bit float tensor
/// replaced by an f32 copy (the resident ones' copies kept in \p cache
/// when there is one), then stores the f32 outputs back into \p outputs.
llvm::Error runWidened(llvm::ArrayRef<const Tensor *> inputs,
                       llvm::ArrayRef<Tensor *> outputs, DnnlCache *cache,
                       KernelOnTensors run);

/// Whether any tensor of \p chain's links is a 16-bit float one.
bool holds16BitFloats(llvm::ArrayRef<ChainLink> chain);

using ChainOnTensors =
    llvm::function_ref<llvm::Expected<bool>(llvm::ArrayRef<ChainLink>)>;

/// runWidened for a chain (Device::launchChain): \p run gets \p chain
/// with its 16-bit float inputs, results between links and last result
/// f32; the last result is rounded back when \p run ran it. Returns what
/// \p run returns.
llvm::Expected<bool> runChainWidened(llvm::ArrayRef<ChainLink> chain,
                                     DnnlCache *cache, ChainOnTensors run);

} // namespace pax::runtime::cpu

#endif
