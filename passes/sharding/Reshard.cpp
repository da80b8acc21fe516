//===- Reshard.cpp - The one resharding planner ---------------------------===//
#include "passes/sharding/Reshard.h"

#include "llvm/ADT/STLExtras.h"

namespace pax {

llvm::StringRef reshardStepName(ReshardStep::Kind k) {
  switch (k) {
  case ReshardStep::Kind::AllReduce:
    return "all_reduce";
  case ReshardStep::Kind::ReduceScatter:
    return "reduce_scatter";
  case ReshardStep::Kind::AllToAll:
    return "all_to_all";
  case ReshardStep::Kind::AllGather:
    return "all_gather";
  case ReshardStep::Kind::Slice:
    return "slice";
  case ReshardStep::Kind::Halo:
    return "halo_exchange";
  case ReshardStep::Kind::Broadcast:
    return "broadcast";
  case ReshardStep::Kind::SendRecv:
    return "send_recv";
  }
  llvm_unreachable("unknown step kind");
}

TensorLayout reducedLayout(TensorLayout l) {
  for (Digit &d : l.digits)
    if (d.role == Digit::Role::Partial)
      d.role = Digit::Role::Replicated;
  return l;
}

namespace {
/// Builds steps over digit positions of a common device numbering.
class Planner {
public:
  Planner(const TensorType &t, int64_t gpusPerNode,
          llvm::ArrayRef<int64_t> sizes, int64_t block)
      : bytesPerElement(dtypeBytes(t.elem)), gpusPerNode(gpusPerNode),
        block(block) {
    int64_t pos = 1;
    for (int64_t s : sizes) {
      // A digit stays inside a node when every value it takes does.
      intra.push_back(pos * s <= gpusPerNode);
      size.push_back(s);
      pos *= s;
    }
  }

  /// Adds one collective over \p digits; \p grow is how the block changes.
  void add(ReshardStep::Kind kind, llvm::ArrayRef<unsigned> digits) {
    if (digits.empty())
      return;
    ReshardStep s;
    s.kind = kind;
    s.digits.assign(digits.begin(), digits.end());
    for (unsigned d : digits) {
      s.groupSize *= size[d];
      if (intra[d])
        s.groupPerNode *= size[d];
    }
    int64_t before = block;
    if (kind == ReshardStep::Kind::AllGather)
      block *= s.groupSize;
    if (kind == ReshardStep::Kind::ReduceScatter ||
        kind == ReshardStep::Kind::Slice)
      block /= s.groupSize;
    int64_t buffer = kind == ReshardStep::Kind::AllGather ? block : before;
    s.bytes = kind == ReshardStep::Kind::Slice ? 0 : buffer * bytesPerElement;
    steps.push_back(s);
  }

  llvm::SmallVector<ReshardStep, 4> steps;

private:
  int64_t bytesPerElement, gpusPerNode, block;
  llvm::SmallVector<bool, 8> intra;
  llvm::SmallVector<int64_t, 8> size;
};
} // namespace

/// Point-to-point fallback: every consumer device fetches its whole block.
static llvm::SmallVector<ReshardStep, 4>
pointToPoint(const TensorLayout &to, const TensorType &t, int64_t gpusPerNode) {
  ReshardStep s;
  s.kind = ReshardStep::Kind::SendRecv;
  s.groupSize = to.devices();
  s.groupPerNode = std::min(s.groupSize, gpusPerNode);
  s.bytes = to.blockElements(t) * dtypeBytes(t.elem);
  return {s};
}

/// True when the shorter digit list is a prefix (in sizes) of the longer.
static bool prefixLinesUp(const TensorLayout &a, const TensorLayout &b) {
  size_t n = std::min(a.digits.size(), b.digits.size());
  for (size_t i = 0; i < n; ++i)
    if (a.digits[i].size != b.digits[i].size)
      return false;
  return true;
}

llvm::SmallVector<ReshardStep, 4> planReshard(const TensorLayout &from,
                                              const TensorLayout &to,
                                              const TensorType &t,
                                              int64_t gpusPerNode,
                                              bool fromReplicatedIsPartial) {
  if (!prefixLinesUp(from, to))
    return pointToPoint(to, t, gpusPerNode);
  using Role = Digit::Role;
  // A consumer on fewer devices is treated as replicated on the rest (it
  // gathers like the others); a producer on fewer devices broadcasts its
  // blocks to the rest first (digits past its own), then each slices.
  size_t own = from.digits.size(), n = std::max(own, to.digits.size());
  auto fromDigit = [&](size_t i) {
    Digit d = i < own ? from.digits[i]
                      : Digit{to.digits[i].size, Role::Replicated, -1, 0};
    if (fromReplicatedIsPartial && d.role == Role::Replicated && i < own)
      d.role = Role::Partial;
    return d;
  };
  auto toDigit = [&](size_t i) {
    if (i >= to.digits.size() || i >= own)
      return Digit{i < own ? from.digits[i].size : to.digits[i].size,
                   Role::Replicated, -1, 0};
    return to.digits[i];
  };
  llvm::SmallVector<int64_t, 8> sizes;
  llvm::SmallVector<unsigned, 4> broadcast, sliceAfter;
  for (size_t i = 0; i < n; ++i) {
    sizes.push_back(fromDigit(i).size);
    if (i >= own) {
      broadcast.push_back(unsigned(i));
      if (to.digits[i].role == Role::Split)
        sliceAfter.push_back(unsigned(i));
    }
  }
  Planner p(t, gpusPerNode, sizes, from.blockElements(t));
  p.add(ReshardStep::Kind::Broadcast, broadcast);
  p.add(ReshardStep::Kind::Slice, sliceAfter);
  llvm::SmallVector<unsigned, 4> allReduce, reduceScatter, allToAll, gather,
      slice;
  for (unsigned i = 0; i < n; ++i) {
    Digit a = fromDigit(i);
    Digit b = toDigit(i);
    if (to.irregular && b.role == Role::Split)
      b.role = Role::Replicated; // an irregular reader needs the whole dim
    if (a == b)
      continue;
    if (a.role == Role::Partial)
      (b.role == Role::Split ? reduceScatter : allReduce).push_back(i);
    else if (a.role == Role::Split)
      (b.role == Role::Split ? allToAll : gather).push_back(i);
    else if (b.role == Role::Split)
      slice.push_back(i);
  }
  p.add(ReshardStep::Kind::AllReduce, allReduce);
  p.add(ReshardStep::Kind::ReduceScatter, reduceScatter);
  p.add(ReshardStep::Kind::AllToAll, allToAll);
  p.add(ReshardStep::Kind::AllGather, gather);
  p.add(ReshardStep::Kind::Slice, slice);
  // Window reads past the block: neighbours exchange halos.
  if (!to.irregular)
    for (size_t d = 0; d < to.parts.size(); ++d) {
      int64_t halo = to.haloLo[d] + to.haloHi[d];
      if (halo == 0 || to.parts[d] == 1)
        continue;
      ReshardStep s;
      s.kind = ReshardStep::Kind::Halo;
      for (unsigned i = 0; i < to.digits.size(); ++i)
        if (to.digits[i].role == Role::Split &&
            to.digits[i].tensorDim == int(d))
          s.digits.push_back(i);
      s.groupSize = 2; // each device trades with its neighbours
      s.groupPerNode = 2;
      int64_t cross =
          to.blockElements(t) /
          std::max<int64_t>(1, (t.shape[d] + to.parts[d] - 1) / to.parts[d]);
      s.bytes = halo * cross * dtypeBytes(t.elem);
      p.steps.push_back(s);
    }
  return p.steps;
}

} // namespace pax
