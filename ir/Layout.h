//===- Layout.h - Where blocks of a tensor live, and who talks ---*- C++
//-*-===//
//
// A layout says, for every prime digit of a device id (least significant
// first), what that digit selects in a tensor: a block of one tensor dim (at
// some level of that dim's split), nothing (replicated along it), or a
// partial sum. Device groups say which devices a collective runs across: the
// devices numbered in a mixed-radix space, a group being those that differ
// only in the `over` digits. Both are IR attributes that print and parse:
//
//   layout = layout[2 partial, 2 dim(0, 0), 3 rep]
//   groups = groups[space [2, 2], over [0, 1]]
//
// The sharding passes compute layouts (passes/sharding/Layout.h), insert-
// collectives writes them on collective ops, and codegen reads them back.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_IR_LAYOUT_H
#define PAX_IR_LAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pax {

/// One prime digit of a device id and what it selects in a tensor.
struct Digit {
  enum class Role : uint8_t { Replicated, Split, Partial };
  int64_t size = 1; ///< a prime
  Role role = Role::Replicated;
  int tensorDim = -1; ///< Split: the tensor dim it selects a block of
  int level = 0;      ///< Split: 0 for the dim's most significant digit

  friend bool operator==(const Digit &a, const Digit &b) {
    return a.size == b.size && a.role == b.role && a.tensorDim == b.tensorDim &&
           a.level == b.level;
  }
};

/// A block of a tensor one device holds.
struct Block {
  bool held = true; ///< false: the device holds nothing
  std::vector<int64_t> lo, size;
};

/// A tensor's layout over a numbering of devices: its digits, least
/// significant first (an IR attribute).
struct LayoutAttr {
  std::vector<Digit> digits;
  friend bool operator==(const LayoutAttr &a, const LayoutAttr &b) {
    return a.digits == b.digits;
  }

  /// The devices it numbers (the product of its digits).
  int64_t devices() const;
  /// The block device \p d holds of a tensor of \p shape: whole along
  /// dims no digit splits, nothing past the layout's devices. An error
  /// when a dim's blocks do not divide it.
  llvm::Expected<Block> block(llvm::ArrayRef<int64_t> shape, int64_t d) const;
};

/// Where the blocks of a tensor live, as ONNX's ShardingSpecProto says it:
/// the split axes, and for each shard (row-major over those axes) the
/// devices that hold it (several: copies).
struct TensorSharding {
  struct Dim {
    int axis;
    int64_t extent;
    int64_t shards;
  };
  std::vector<Dim> dims; ///< ascending axes, each split in 2 or more
  std::vector<std::vector<int64_t>> devices; ///< per shard, ascending
};

/// The sharding of a tensor of \p shape in layout \p l (its partial
/// digits count as copies: the sharding of the reduced tensor). An error
/// when a dim's blocks do not divide it.
llvm::Expected<TensorSharding> shardingOf(const LayoutAttr &l,
                                          llvm::ArrayRef<int64_t> shape);

/// The devices a collective runs on, numbered in mixed radix over `space`
/// (least significant digit first), and the digits it runs across (an IR
/// attribute).
struct GroupsAttr {
  std::vector<int64_t> space;
  std::vector<int64_t> over;
  friend bool operator==(const GroupsAttr &a, const GroupsAttr &b) {
    return a.space == b.space && a.over == b.over;
  }

  /// The devices the space numbers (the product of its sizes).
  int64_t devices() const;
  /// Digit \p i of device \p d.
  int64_t digit(int64_t d, size_t i) const;
  /// The groups: devices that differ only in the `over` digits, each in
  /// increasing order, the groups ordered by their first device.
  std::vector<std::vector<int64_t>> groups() const;
  /// An error message when the space is empty, a size is not positive, or
  /// an `over` digit is outside the space; "" when well formed.
  std::string check() const;
};

/// "layout[2 partial, 2 dim(0, 0), 3 rep]"
std::string formatLayout(const LayoutAttr &l);
/// "groups[space [2, 2], over [0, 1]]"
std::string formatGroups(const GroupsAttr &g);

} // namespace pax

#endif // PAX_IR_LAYOUT_H
