//===- Soap.h - SOAP roles of iteration dims ------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"

namespace pax {

/// FlexFlow's SOAP roles of an iteration dim, derived from access maps.
enum class SoapRole : uint8_t {
  Sample,    ///< reaches the batch dim of a graph input
  Attribute, ///< any other parallel dim (spatial, sequence, heads, ...)
  Parameter, ///< indexes a parameter (weight) and is not a sample dim
  Reduction, ///< a `red` dim
};

llvm::StringRef soapRoleName(SoapRole r);

/// The iteration dim that carries a tensor dim's identity: `d`, the window's
/// output dim, a group's major dim; -1 for `_`, `*` and lookups.
int carrierDim(const AccessExpr &e);

/// Per op of \p f, which iteration dims the batch dim reaches (the
/// parallel ones are the Sample role's; a reduction over the batch is
/// flagged too), in `iters` order.
llvm::DenseMap<const Op *, llvm::SmallVector<bool, 6>>
sampleIters(const Func &f);

/// Roles of every iteration dim of every op of \p f, in `iters` order.
/// Sample dims start at dim 0 of each function argument and flow through
/// access maps (the major dim of a group carries it).
llvm::DenseMap<const Op *, llvm::SmallVector<SoapRole, 6>>
computeSoapRoles(const Func &f);

} // namespace pax
