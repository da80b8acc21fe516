//===- Reach.h - The block of a tensor an op's device block reaches
//--------===//
//
// An op runs on each of its devices over a block of its iteration space (a
// configuration's split, the device's place in it); each of its access
// maps then reaches a box of the tensor it reads or writes. The plan's
// buffers are those boxes (codegen), and so are the loads the memory model
// counts (passes/sharding/PeakMemory).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

namespace pax {

/// A box of a tensor: where a device's block starts and how far it reaches.
struct Box {
  llvm::SmallVector<int64_t, 4> lo, size;
  bool empty = false; ///< the device holds nothing

  static Box whole(const TensorType &t);
  static Box none(size_t rank);
  bool contains(const Box &o) const;
  int64_t elements() const;
  friend bool operator==(const Box &a, const Box &b) {
    return a.empty == b.empty && a.lo == b.lo && a.size == b.size;
  }
};

/// A device's block of an op's iteration space.
struct IterBlock {
  llvm::SmallVector<int64_t, 6> offset, extent;
};

/// Block \p d (row-major over the split dims) of \p op's iteration space
/// split as \p config says.
IterBlock iterBlock(const Op &op, llvm::ArrayRef<int64_t> config, int64_t d);

/// The box of a tensor of \p t that \p map reaches over block \p b.
Box reachedBox(const Op &op, const AccessMap &map, const TensorType &t,
               const IterBlock &b);

} // namespace pax
