//===- KernelContext.h - What the generic loops share ----------*- C++ -*-===//
#ifndef PAX_RUNTIME_CPU_KERNELCONTEXT_H
#define PAX_RUNTIME_CPU_KERNELCONTEXT_H

#include "runtime/Tensor.h"
#include "runtime/cpu/IterationSpace.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace pax::runtime::cpu {

/// A compute checked against its tensors, with its maps compiled.
struct Prepared {
  const plan::Compute &c;
  llvm::ArrayRef<const Tensor *> ins;
  llvm::ArrayRef<Tensor *> outs;
  IterationSpace space;
  llvm::SmallVector<AccessIndexer, 4> inMaps, outMaps;
};

/// An error about \p c: `compute 'name' (kind): msg`.
llvm::Error computeError(const plan::Compute &c, const llvm::Twine &msg);

/// The attribute \p name of \p c, or nullptr.
const plan::Attr *findAttr(const plan::Compute &c, llvm::StringRef name);
/// A numeric attribute (int or float), or \p def.
double attrReal(const plan::Compute &c, llvm::StringRef name, double def);
/// An int attribute, or \p def.
int64_t attrInt(const plan::Compute &c, llvm::StringRef name, int64_t def);
/// An ints attribute, or empty.
std::vector<int64_t> attrInts(const plan::Compute &c, llvm::StringRef name);

/// Checks \p inputs and \p outputs against \p c and compiles its maps.
llvm::Expected<Prepared> prepare(const plan::Compute &c,
                                 llvm::ArrayRef<const Tensor *> inputs,
                                 llvm::ArrayRef<Tensor *> outputs);

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
