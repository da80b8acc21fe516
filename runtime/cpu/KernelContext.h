//===- KernelContext.h - What the generic loops share ----------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_KERNELCONTEXT_H
#define PAX_RUNTIME_CPU_KERNELCONTEXT_H

#include "runtime/Prepared.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace pax::runtime::cpu {

/// Calls \p fn once per outer point of \p s, in parallel; the point's inner
/// dims are zero and \p fn must leave them zero (nextInner does).
void forEachOuter(const IterationSpace &s,
                  llvm::function_ref<void(llvm::MutableArrayRef<int64_t>)> fn);

/// Like forEachOuter, but calls \p fn once per run of up to `count`
/// consecutive points along the last outer dim, \p point being the first.
void forEachOuterRun(
    const IterationSpace &s,
    llvm::function_ref<void(llvm::MutableArrayRef<int64_t>, int64_t)> fn);

} // namespace pax::runtime::cpu

#endif // PAX_RUNTIME_CPU_KERNELCONTEXT_H
