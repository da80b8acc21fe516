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

ReshardStep reducePartials(const TensorLayout &l, const TensorType &t,
                           int64_t gpusPerNode) {
  ReshardStep s;
  s.kind = ReshardStep::Kind::AllReduce;
  int64_t pos = 1;
  for (unsigned i = 0; i < l.digits.size(); ++i) {
    const Digit &d = l.digits[i];
    if (d.role == Digit::Role::Partial) {
      s.digits.push_back(i);
      s.groupSize *= d.size;
      if (pos * d.size <= gpusPerNode)
        s.groupPerNode *= d.size;
    }
    pos *= d.size;
  }
  if (!s.digits.empty())
    s.bytes = l.blockElements(t) * dtypeBytes(t.elem);
  return s;
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

/// The most halo rows one device of \p to receives along dim \p d.
static int64_t haloRows(const TensorLayout &to, size_t d) {
  return to.parts[d] < 2 ? 0 : to.haloMost[d];
}

int64_t neededElements(const TensorLayout &to, const TensorType &t) {
  if (to.irregular)
    return t.numel();
  int64_t n = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t block = (t.shape[d] + to.parts[d] - 1) / to.parts[d];
    n *= std::min(t.shape[d], block + haloRows(to, d));
  }
  return n;
}

/// Point-to-point fallback: every consumer device fetches what it reads,
/// after partial sums (if any) are all-reduced where they lie.
static llvm::SmallVector<ReshardStep, 4>
pointToPoint(const TensorLayout &from, const TensorLayout &to,
             const TensorType &t, int64_t gpusPerNode, ReshardTrace *trace) {
  llvm::SmallVector<ReshardStep, 4> steps;
  ReshardStep reduce = reducePartials(from, t, gpusPerNode);
  if (!reduce.digits.empty())
    steps.push_back(reduce);
  ReshardStep s;
  s.kind = ReshardStep::Kind::SendRecv;
  s.groupSize = to.devices();
  s.groupPerNode = std::min(s.groupSize, gpusPerNode);
  if (from.offset != to.offset) {
    // Placed apart: inside a node when both device ranges lie in one.
    int64_t lo = std::min(from.offset, to.offset),
            hi = std::max(from.offset + from.devices(),
                          to.offset + to.devices()) -
                 1;
    bool oneNode = gpusPerNode > 0 && lo / gpusPerNode == hi / gpusPerNode;
    s.groupPerNode = oneNode ? s.groupSize : 0;
  }
  s.bytes = neededElements(to, t) * dtypeBytes(t.elem);
  if (trace) {
    *trace = ReshardTrace();
    trace->pointToPoint = true;
  }
  steps.push_back(s);
  return steps;
}

/// True when the split digits of tensor dim \p dim in \p cur are exactly
/// the coarsest levels of that dim's split in \p src (same positions,
/// sizes and levels): then every device's block is contiguous.
static bool coarsestOf(llvm::ArrayRef<Digit> cur, llvm::ArrayRef<Digit> src,
                       int dim) {
  auto on = [&](const Digit &d) {
    return d.role == Digit::Role::Split && d.tensorDim == dim;
  };
  int m = int(llvm::count_if(cur, on));
  for (size_t p = 0; p < cur.size(); ++p) {
    bool inCur = on(cur[p]);
    bool inSrc = p < src.size() && on(src[p]) && src[p].level < m;
    if (inCur != inSrc || (inCur && !(cur[p] == src[p])))
      return false;
  }
  return true;
}

/// True when every device's block under \p cur is one contiguous box.
static bool contiguous(llvm::ArrayRef<Digit> cur, llvm::ArrayRef<Digit> a,
                       llvm::ArrayRef<Digit> b) {
  uint64_t seen = 0; // tensor dims checked
  for (const Digit &d : cur) {
    if (d.role != Digit::Role::Split)
      continue;
    uint64_t bit = uint64_t(1) << (d.tensorDim & 63);
    if (seen & bit)
      continue;
    seen |= bit;
    if (!coarsestOf(cur, a, d.tensorDim) && !coarsestOf(cur, b, d.tensorDim))
      return false;
  }
  return true;
}

/// True when the shorter digit list is a prefix (in sizes) of the longer.
static bool prefixLinesUp(const TensorLayout &a, const TensorLayout &b) {
  size_t n = std::min(a.digits.size(), b.digits.size());
  for (size_t i = 0; i < n; ++i)
    if (a.digits[i].size != b.digits[i].size)
      return false;
  return true;
}

namespace {
/// Reads the producer's and the consumer's digits position by position over
/// a common device numbering. A consumer on fewer devices is treated as
/// replicated on the rest (it gathers like the others); a producer on fewer
/// devices broadcasts its blocks to the rest first (digits past its own),
/// then each slices.
class DigitPairs {
public:
  DigitPairs(const TensorLayout &from, const TensorLayout &to,
             bool fromReplicatedIsPartial)
      : own(from.digits.size()), n(std::max(own, to.digits.size())), from(from),
        to(to), fromReplicatedIsPartial(fromReplicatedIsPartial) {}

  /// The producer's digit at \p i (replicated past its own digits).
  Digit fromDigit(size_t i) const {
    using Role = Digit::Role;
    Digit d = i < own ? from.digits[i]
                      : Digit{to.digits[i].size, Role::Replicated, -1, 0};
    if (fromReplicatedIsPartial && d.role == Role::Replicated && i < own)
      d.role = Role::Partial;
    return d;
  }

  /// The consumer's digit at \p i among the producer's own positions
  /// (replicated past either digit list).
  Digit toDigit(size_t i) const {
    if (i >= to.digits.size() || i >= own)
      return Digit{i < own ? from.digits[i].size : to.digits[i].size,
                   Digit::Role::Replicated, -1, 0};
    return to.digits[i];
  }

  /// What the consumer's devices end up holding at position \p i.
  Digit target(size_t i) const {
    using Role = Digit::Role;
    Digit b = i < to.digits.size()
                  ? to.digits[i]
                  : Digit{fromDigit(i).size, Role::Replicated, -1, 0};
    if (to.irregular && b.role == Role::Split)
      b = Digit{b.size, Role::Replicated, -1, 0}; // needs the whole dim
    return b;
  }

  /// The producer's digit count, and the common digit count.
  size_t own, n;

private:
  const TensorLayout &from, &to;
  bool fromReplicatedIsPartial;
};

/// The start and target digits at every common position, with the
/// positions past the producer's own that are broadcast (and then sliced).
struct AlignedDigits {
  llvm::SmallVector<int64_t, 8> sizes;
  llvm::SmallVector<Digit, 8> a, b;
  llvm::SmallVector<unsigned, 4> broadcast, sliceAfter;
};
} // namespace

/// Collects the start and target digits of \p pairs position by position.
static AlignedDigits alignDigits(const DigitPairs &pairs) {
  AlignedDigits al;
  for (size_t i = 0; i < pairs.n; ++i) {
    al.sizes.push_back(pairs.fromDigit(i).size);
    al.a.push_back(pairs.fromDigit(i));
    al.b.push_back(pairs.target(i));
    if (i >= pairs.own) {
      al.broadcast.push_back(unsigned(i));
      if (al.b[i].role == Digit::Role::Split)
        al.sliceAfter.push_back(unsigned(i));
    }
  }
  return al;
}

/// Adds one collective per kind over the producer's own digits that differ
/// from the consumer's, in the planner's fixed order.
static void addDigitSteps(Planner &p, const DigitPairs &pairs,
                          llvm::ArrayRef<Digit> a, bool toIrregular) {
  using Role = Digit::Role;
  llvm::SmallVector<unsigned, 4> allReduce, reduceScatter, allToAll, gather,
      slice;
  for (unsigned i = 0; i < pairs.own && i < pairs.n; ++i) {
    Digit x = a[i], y = pairs.toDigit(i);
    if (toIrregular && y.role == Role::Split)
      y.role = Role::Replicated; // an irregular reader needs the whole dim
    if (x == y)
      continue;
    if (x.role == Role::Partial)
      (y.role == Role::Split ? reduceScatter : allReduce).push_back(i);
    else if (x.role == Role::Split)
      (y.role == Role::Split ? allToAll : gather).push_back(i);
    else if (y.role == Role::Split)
      slice.push_back(i);
  }
  p.add(ReshardStep::Kind::AllReduce, allReduce);
  p.add(ReshardStep::Kind::ReduceScatter, reduceScatter);
  p.add(ReshardStep::Kind::AllToAll, allToAll);
  p.add(ReshardStep::Kind::AllGather, gather);
  p.add(ReshardStep::Kind::Slice, slice);
}

/// Applies \p steps to \p cur (starting at \p a, heading for \p b), adding
/// each layout passed to \p after when \p record. False when a layout
/// before the last step is not contiguous.
static bool
walkSteps(llvm::ArrayRef<ReshardStep> steps, llvm::ArrayRef<Digit> a,
          llvm::ArrayRef<Digit> b, bool record,
          llvm::SmallVector<Digit, 8> &cur,
          llvm::SmallVector<llvm::SmallVector<Digit, 8>, 4> &after) {
  for (size_t k = 0; k < steps.size(); ++k) {
    const ReshardStep &s = steps[k];
    for (unsigned i : s.digits)
      cur[i] = s.kind == ReshardStep::Kind::Broadcast
                   ? Digit{cur[i].size, Digit::Role::Replicated, -1, 0}
                   : b[i];
    // The last step reaches the consumer's layout, contiguous by making.
    if (k + 1 < steps.size() && !contiguous(cur, a, b))
      return false;
    if (record)
      after.push_back(cur);
  }
  return true;
}

/// The halo exchange along tensor dim \p d that a window reader \p to needs.
static ReshardStep haloStep(const TensorLayout &to, const TensorType &t,
                            size_t d) {
  ReshardStep s;
  s.kind = ReshardStep::Kind::Halo;
  for (unsigned i = 0; i < to.digits.size(); ++i)
    if (to.digits[i].role == Digit::Role::Split &&
        to.digits[i].tensorDim == int(d))
      s.digits.push_back(i);
  s.groupSize = 2; // each device trades with its neighbours
  s.groupPerNode = 2;
  // What crosses: the block's other dims, with the halos of the dims
  // exchanged before this one (so corners arrive too).
  int64_t cross = 1;
  for (size_t e = 0; e < t.shape.size(); ++e)
    if (e != d)
      cross *=
          std::min(t.shape[e], (t.shape[e] + to.parts[e] - 1) / to.parts[e] +
                                   (e < d ? haloRows(to, e) : 0));
  s.bytes = haloRows(to, d) * cross * dtypeBytes(t.elem);
  return s;
}

/// Adds a halo exchange for every dim of \p to read past its block, adding
/// the (unchanged) layout \p cur to \p after for each when \p record.
static void
addHaloSteps(Planner &p, const TensorLayout &to, const TensorType &t,
             bool record, const llvm::SmallVector<Digit, 8> &cur,
             llvm::SmallVector<llvm::SmallVector<Digit, 8>, 4> &after) {
  if (to.irregular)
    return;
  for (size_t d = 0; d < to.parts.size(); ++d) {
    int64_t halo = to.haloLo[d] + to.haloHi[d];
    if (halo == 0 || to.parts[d] == 1)
      continue;
    p.steps.push_back(haloStep(to, t, d));
    if (record)
      after.push_back(cur);
  }
}

llvm::SmallVector<ReshardStep, 4>
planReshard(const TensorLayout &from, const TensorLayout &to,
            const TensorType &t, int64_t gpusPerNode,
            bool fromReplicatedIsPartial, ReshardTrace *trace) {
  // Devices placed apart: each consumer device fetches what it reads.
  if (!prefixLinesUp(from, to) || from.offset != to.offset)
    return pointToPoint(from, to, t, gpusPerNode, trace);
  DigitPairs pairs(from, to, fromReplicatedIsPartial);
  AlignedDigits al = alignDigits(pairs);
  Planner p(t, gpusPerNode, al.sizes, from.blockElements(t));
  p.add(ReshardStep::Kind::Broadcast, al.broadcast);
  p.add(ReshardStep::Kind::Slice, al.sliceAfter);
  addDigitSteps(p, pairs, al.a, to.irregular);
  // The layouts the steps pass through; a non-contiguous one falls back.
  llvm::SmallVector<llvm::SmallVector<Digit, 8>, 4> after;
  llvm::SmallVector<Digit, 8> cur = al.a;
  if (!walkSteps(p.steps, al.a, al.b, trace != nullptr, cur, after))
    return pointToPoint(from, to, t, gpusPerNode, trace);
  // Window reads past the block: neighbours exchange halos.
  addHaloSteps(p, to, t, trace != nullptr, cur, after);
  if (trace) {
    trace->start = al.a;
    trace->own = unsigned(pairs.own);
    trace->after = std::move(after);
    trace->pointToPoint = false;
  }
  return p.steps;
}

} // namespace pax
