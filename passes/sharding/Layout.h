//===- Layout.h - Where each block of a tensor lives ----------------------===//
//
// An op in configuration c runs on devices 0 .. prod(c)-1, numbered in mixed
// radix over its split iteration dims in iteration order (the first dim most
// significant; so the last, innermost splits fall inside a node). Each split
// factor is factored into prime digits. A tensor's layout says, for every
// digit of the device id, what that digit selects in the tensor: a block of
// one tensor dim (at some level of that dim's split), nothing (the tensor is
// replicated along it), or a partial sum (it is split along a reduction).
//
//   matmul <m: 2, k: 4> result [m, n]:  digits (k:2 partial, k:2 partial,
//                                               m:2 split dim 0 level 0)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Layout.h"
#include "passes/sharding/ConfigSpace.h"

namespace pax {

/// A tensor's layout over the devices of one op configuration.
struct TensorLayout {
  /// Least significant first; their sizes multiply to the device count.
  llvm::SmallVector<Digit, 8> digits;
  /// Blocks per tensor dim (the product of its Split digits).
  llvm::SmallVector<int64_t, 4> parts;
  /// Consumer side: elements beyond its block each device also reads, per
  /// tensor dim (a window's halo), before and after the block.
  llvm::SmallVector<int64_t, 4> haloLo, haloHi;
  /// The most halo elements one block receives in each dim (both sides
  /// together, clipped at the tensor's edges): what a halo exchange moves
  /// to the busiest device.
  llvm::SmallVector<int64_t, 4> haloMost;
  /// A dim read in an irregular way (a concat input, a strided slice): each
  /// device needs the whole dim. Set on consumer layouts only.
  bool irregular = false;
  /// The first of the devices the digits number: an op placed at device
  /// offset o (a multiple of its device count) runs on o .. o + devices-1.
  int64_t offset = 0;

  int64_t devices() const;
  /// Elements of the block one device holds (without halo).
  int64_t blockElements(const TensorType &t) const;
  /// "[2, 1] partial 4 x rep 2" for reports and tests.
  std::string str() const;
};

/// \p l moved to start at device \p offset.
inline TensorLayout placedAt(TensorLayout l, int64_t offset) {
  l.offset = offset;
  return l;
}

/// The device offsets an op on \p k of \p n devices may take: the multiples
/// of \p k that keep it inside the \p n (FlexFlow's device assignment of an
/// operator; disjoint ops can then run at once).
std::vector<int64_t> placements(int64_t k, int64_t n);

/// Offset \p i of \p offsets, 0 where none are given.
inline int64_t offsetOf(llvm::ArrayRef<int64_t> offsets, size_t i) {
  return offsets.empty() ? 0 : offsets[i];
}

/// The layout op's result \p result has when op runs in configuration \p c.
/// Reduction dims that the result does not index make it partial.
TensorLayout resultLayout(const Op &op, const Config &c, unsigned result);

/// The layout op needs for operand \p operand in configuration \p c.
TensorLayout operandLayout(const Op &op, const Config &c, unsigned operand);

/// The prime factors of \p n, ascending.
llvm::SmallVector<int64_t, 8> primeFactors(int64_t n);

} // namespace pax
