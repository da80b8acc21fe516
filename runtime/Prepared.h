//===- Prepared.h - A compute checked against its buffers ------*- C++ -*-===//
//
// What every backend does before it runs a compute: check its tensors
// against the plan, compile its access maps against the buffers' shapes
// (IterationSpace.h) and read its attributes. Backend-neutral: the CPU
// kernels, the CUDA backend and the emulated one all start here.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_PREPARED_H
#define PAX_RUNTIME_PREPARED_H

#include "codegen/plan/Access.h"
#include "runtime/IterationSpace.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace pax::runtime {

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

/// True when \p a and \p b have the same exprs (their buffers aside).
using plan::sameExprs;
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

} // namespace pax::runtime

#endif // PAX_RUNTIME_PREPARED_H
