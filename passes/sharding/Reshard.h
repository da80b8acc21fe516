//===- Reshard.h - The one resharding planner -----------------------------===//
//
// Given where a producer leaves a tensor and where a consumer needs it, plans
// the moves: digit by digit of the device id (see Layout.h),
//
//   partial    -> replicated  all_reduce      split(i) -> replicated all_gather
//   partial    -> split       reduce_scatter  split(i) -> split(j) all_to_all
//   replicated -> split       local slice     window reads            halo
//   exchange
//
// one collective per kind over the digits that need it, in that order.
// Layouts that do not line up digit by digit (different device counts with
// different digit sizes), or that start at different devices (ops placed
// apart), fall back to point-to-point transfers. The cost
// model prices exactly these plans and insert-collectives emits exactly
// them, so predicted and performed communication never disagree.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/sharding/Layout.h"

namespace pax {

/// One collective (or local step) of a resharding plan.
struct ReshardStep {
  enum class Kind : uint8_t {
    AllReduce,
    ReduceScatter,
    AllToAll,
    AllGather,
    Slice,
    Halo,
    Broadcast,
    SendRecv,
  };
  Kind kind = Kind::Slice;
  /// Positions (in the layouts' digit lists) the collective runs across.
  llvm::SmallVector<unsigned, 4> digits;
  int64_t groupSize = 1; ///< devices in one group
  /// Of those, how many share a node (a send_recv between ops placed on
  /// different nodes: 0).
  int64_t groupPerNode = 1;
  /// Bytes of the collective's buffer per device, as NCCL counts them:
  /// all_reduce and all_to_all the buffer, all_gather the gathered output,
  /// reduce_scatter the input; halo and send/recv what one device receives.
  int64_t bytes = 0;
};

llvm::StringRef reshardStepName(ReshardStep::Kind k);

/// The layouts a plan of planReshard passes through, over the positions of
/// the common device numbering (what insert-collectives needs to place each
/// device's block before and after every step).
struct ReshardTrace {
  /// Where the moves start: the producer's digits, and replicated digits
  /// past its own (positions >= own), which hold nothing before a broadcast.
  llvm::SmallVector<Digit, 8> start;
  unsigned own = 0;
  /// The digits after each step (a halo step leaves them as they are).
  llvm::SmallVector<llvm::SmallVector<Digit, 8>, 4> after;
  /// True for the point-to-point fallback: one send_recv from the
  /// producer's layout straight to the consumer's, after an all_reduce
  /// where the producer's layout is partial.
  bool pointToPoint = false;
};

/// The moves from \p from to \p to of a tensor of type \p t. Devices are
/// grouped into nodes of \p gpusPerNode consecutive ids. With
/// \p fromReplicatedIsPartial, \p from's replicated digits hold partial sums
/// (a consumer's gradient on its way back to the producer).
/// Plans that would pass through a layout whose blocks are not contiguous
/// (a dim that loses its coarse split before its fine one) take the
/// point-to-point fallback. With \p trace, also records the layouts.
llvm::SmallVector<ReshardStep, 4>
planReshard(const TensorLayout &from, const TensorLayout &to,
            const TensorType &t, int64_t gpusPerNode,
            bool fromReplicatedIsPartial = false,
            ReshardTrace *trace = nullptr);

/// Elements one device of \p to reads: its block plus halos, clipped to the
/// tensor; the whole tensor when the reader is irregular.
int64_t neededElements(const TensorLayout &to, const TensorType &t);

/// The all_reduce that sums the partial digits of \p l (a tensor of type
/// \p t leaving the program); no digits and 0 bytes when it has none.
ReshardStep reducePartials(const TensorLayout &l, const TensorType &t,
                           int64_t gpusPerNode);

/// A layout with its partial digits reduced (replicated).
TensorLayout reducedLayout(TensorLayout l);

} // namespace pax
