//===- Collectives.cpp - Alpha-beta costs of collectives on a cluster -----===//
#include "passes/cost/Collectives.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>

using namespace pax;

namespace {

/// A bad group is a bug of the caller, never of the user's input.
void checkGroup(const Cluster &c, Group g) {
  assert(g.size >= 1 && g.perNode >= 1 && "a group has at least one member");
  assert(g.size % g.perNode == 0 && "a group fills its nodes evenly");
  assert(g.perNode <= c.gpusPerNode && "more group members than a node holds");
  assert(g.size <= c.gpus && "a group larger than the cluster");
  (void)c;
  (void)g;
}

/// The link a flat schedule over \p g runs at: the slower of the levels it
/// crosses (a ring with one member per node uses inter-node links only).
LinkLevel slowestLink(const Cluster &c, Group g) {
  if (g.nodes() == 1)
    return c.intraNode;
  if (g.perNode == 1)
    return c.interNode;
  return {std::min(c.intraNode.bandwidth, c.interNode.bandwidth),
          std::max(c.intraNode.latency, c.interNode.latency)};
}

/// Ring all-gather or reduce-scatter of a \p bytes buffer over \p n members:
/// n-1 steps, each moving bytes/n per member.
double ringGather(const LinkLevel &l, unsigned n, double bytes) {
  return (n - 1) * (bytes / n / l.bandwidth + l.latency);
}

/// Ring all-reduce: a reduce-scatter, then an all-gather.
double ringAllReduce(const LinkLevel &l, unsigned n, double bytes) {
  return 2 * ringGather(l, n, bytes);
}

/// The two levels of a schedule with inner rings of \p inner members inside
/// a node and outer rings over the members at the same inner position.
/// inner = 1 is the flat ring; inner = perNode keeps outer rings across nodes.
struct TwoLevel {
  LinkLevel innerLink, outerLink;
  unsigned inner, outer;
};

TwoLevel splitGroup(const Cluster &c, Group g, unsigned inner) {
  assert(g.perNode % inner == 0 && "inner rings stay inside a node");
  Group outer{g.size / inner, g.perNode / inner};
  return {c.intraNode, slowestLink(c, outer), inner, outer.size};
}

/// The cost of \p algo, given the cost of the two-level schedule with inner
/// rings of each size. Best also tries inner rings smaller than the node:
/// they save ring steps, and they make a group inside one node never dearer
/// than the same group spread over nodes, whose schedules it can all run on
/// faster links.
double schedule(Group g, CollectiveAlgo algo,
                llvm::function_ref<double(unsigned)> costWithInner) {
  switch (algo) {
  case CollectiveAlgo::Ring:
    return costWithInner(1);
  case CollectiveAlgo::Hierarchical:
    return costWithInner(g.perNode);
  case CollectiveAlgo::Best: {
    double best = costWithInner(1);
    for (unsigned inner = 2; inner <= g.perNode; ++inner)
      if (g.perNode % inner == 0)
        best = std::min(best, costWithInner(inner));
    return best;
  }
  }
  llvm_unreachable("unknown collective algorithm");
}

} // namespace

/// All-reduce with inner rings of \p inner devices: reduce-scatter in the
/// inner rings, all-reduce of the inner part across the outer rings,
/// all-gather in the inner rings.
static double twoLevelAllReduce(const Cluster &c, Group g, double bytes,
                                unsigned inner) {
  TwoLevel s = splitGroup(c, g, inner);
  return 2 * ringGather(s.innerLink, s.inner, bytes) +
         ringAllReduce(s.outerLink, s.outer, bytes / s.inner);
}

/// Summing partial sums: each member adds (n-1)/n of the buffer, whatever
/// the schedule.
static double reduceSeconds(const Cluster &c, Group g, double bytes) {
  if (c.reduceBandwidth <= 0)
    return 0;
  return double(g.size - 1) / g.size * bytes / c.reduceBandwidth;
}

double pax::allReduce(const Cluster &c, Group g, double bytes,
                      CollectiveAlgo algo) {
  checkGroup(c, g);
  if (g.size == 1 || bytes <= 0)
    return 0;
  return schedule(g, algo,
                  [&](unsigned inner) {
                    return twoLevelAllReduce(c, g, bytes, inner);
                  }) +
         reduceSeconds(c, g, bytes);
}

unsigned pax::allReduceInnerRing(const Cluster &c, Group g, double bytes) {
  checkGroup(c, g);
  if (g.size == 1 || bytes <= 0)
    return 1;
  unsigned best = 1;
  double bestCost = twoLevelAllReduce(c, g, bytes, 1);
  for (unsigned inner = 2; inner <= g.perNode; ++inner)
    if (g.perNode % inner == 0) {
      double cost = twoLevelAllReduce(c, g, bytes, inner);
      if (cost < bestCost)
        best = inner, bestCost = cost;
    }
  return best;
}

double pax::allGather(const Cluster &c, Group g, double bytes,
                      CollectiveAlgo algo) {
  checkGroup(c, g);
  if (g.size == 1 || bytes <= 0)
    return 0;
  // Gather bytes/inner across the outer rings, then everything inside.
  return schedule(g, algo, [&](unsigned inner) {
    TwoLevel s = splitGroup(c, g, inner);
    return ringGather(s.outerLink, s.outer, bytes / s.inner) +
           ringGather(s.innerLink, s.inner, bytes);
  });
}

double pax::reduceScatter(const Cluster &c, Group g, double bytes,
                          CollectiveAlgo algo) {
  // The all-gather schedule run backwards: the same steps, the same bytes,
  // and the sums.
  return allGather(c, g, bytes, algo) + reduceSeconds(c, g, bytes);
}

double pax::allToAll(const Cluster &c, Group g, double bytesPerMember) {
  checkGroup(c, g);
  if (g.size == 1 || bytesPerMember <= 0)
    return 0;
  LinkLevel l = slowestLink(c, g);
  unsigned n = g.size;
  return (n - 1) * (bytesPerMember / n / l.bandwidth + l.latency);
}

double pax::broadcast(const Cluster &c, Group g, double bytes) {
  checkGroup(c, g);
  if (g.size == 1 || bytes <= 0)
    return 0;
  unsigned nodes = g.nodes();
  return bytes / slowestLink(c, g).bandwidth +
         (nodes - 1) * c.interNode.latency +
         (g.size - nodes) * c.intraNode.latency;
}

double pax::sendRecv(const Cluster &c, bool acrossNodes, double bytes) {
  if (bytes <= 0)
    return 0;
  const LinkLevel &l = acrossNodes ? c.interNode : c.intraNode;
  return bytes / l.bandwidth + l.latency;
}

double pax::computeSeconds(const Cluster &c, double flops, bool sixteenBit) {
  assert(flops >= 0 && "a negative amount of work");
  return flops / (sixteenBit && c.halfFlops > 0 ? c.halfFlops : c.peakFlops);
}

bool pax::runsOn16BitRate(const Op &op) {
  OpFamily fam = opKindFamily(op.kind);
  if ((fam != OpFamily::Contraction && fam != OpFamily::Attention) ||
      op.operands.empty())
    return false;
  DType t = op.operands[0].value->type.elem;
  return t == DType::BF16 || t == DType::F16;
}
