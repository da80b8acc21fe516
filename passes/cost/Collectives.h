//===- Collectives.h - Alpha-beta costs of collectives on a cluster -------===//
//
// Seconds a collective takes over a group of devices, priced the way NCCL runs
// it: rings, each step costing the link's latency (alpha) and its bytes over
// the link's bandwidth (beta). Bandwidths are per device (LinkLevel), so the
// rings of different groups that run at the same time share a NIC correctly.
// docs/CLUSTERS.md derives every formula.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/cost/Cluster.h"

namespace pax {

/// The devices a collective runs over: `size` devices, `perNode` of them in
/// each of `size / perNode` nodes (perNode divides size).
struct Group {
  unsigned size;
  unsigned perNode;

  /// Number of nodes the group spans.
  unsigned nodes() const { return size / perNode; }
};

/// How a collective over a group that may span nodes is scheduled.
enum class CollectiveAlgo {
  /// The cheapest of the schedules below and of two-level rings whose inner
  /// rings are smaller than a node.
  Best,
  /// One flat ring over every member; each step runs at the slowest link the
  /// group crosses.
  Ring,
  /// Two-level rings (NCCL's "ring of rings"): inner rings over the members
  /// inside each node, outer rings across nodes over 1/perNode of the data.
  Hierarchical,
};

/// All-reduce of a \p bytes buffer that every member holds (and ends up with
/// the sum of). Ring: 2(n-1)/n * bytes / bw + 2(n-1) alpha. Hierarchical:
/// reduce-scatter inside the node, all-reduce across nodes on bytes/perNode,
/// all-gather inside the node. A group of 1, or 0 bytes, costs 0.
double allReduce(const Cluster &c, Group g, double bytes,
                 CollectiveAlgo algo = CollectiveAlgo::Best);

/// The inner ring size CollectiveAlgo::Best runs an all-reduce of \p bytes
/// over \p g with: 1 for one flat ring; more for Parallax's local
/// aggregation, reducing inside each node before crossing nodes.
unsigned allReduceInnerRing(const Cluster &c, Group g, double bytes);

/// All-gather into a \p bytes buffer: each member starts with bytes/n and ends
/// with all of it. Ring: (n-1)/n * bytes / bw + (n-1) alpha. Hierarchical:
/// all-gather across nodes (to bytes/perNode), then inside the node.
double allGather(const Cluster &c, Group g, double bytes,
                 CollectiveAlgo algo = CollectiveAlgo::Best);

/// Reduce-scatter of a \p bytes buffer that every member holds; each ends
/// with the sum of its bytes/n part. Ring: (n-1)/n * bytes / bw + (n-1) alpha.
/// Hierarchical: reduce-scatter inside the node, then across nodes.
double reduceScatter(const Cluster &c, Group g, double bytes,
                     CollectiveAlgo algo = CollectiveAlgo::Best);

/// All-to-all where every member sends \p bytesPerMember in all (1/n of it to
/// each member, itself included) and receives as much: resharding a T-byte
/// tensor over the group is bytesPerMember = T / n. (n-1)/n *
/// bytesPerMember / bw + (n-1) alpha, over the slowest link the group
/// crosses.
double allToAll(const Cluster &c, Group g, double bytesPerMember);

/// Broadcast of a \p bytes buffer from one member to all: a pipelined chain
/// that visits each node once, bytes / bw over the slowest link plus the
/// latency of every hop: (nodes-1) inter-node hops and (n-nodes) intra-node.
double broadcast(const Cluster &c, Group g, double bytes);

/// One point-to-point transfer of \p bytes between two devices, inside a node
/// or across nodes: bytes / bw + alpha.
double sendRecv(const Cluster &c, bool acrossNodes, double bytes);

/// Seconds one device takes for \p flops at its peak rate: its 16-bit
/// rate where \p sixteenBit (Cluster::halfFlops).
double computeSeconds(const Cluster &c, double flops, bool sixteenBit = false);

/// Whether \p op runs at a device's 16-bit rate: a product, convolution or
/// attention whose first operand is bf16 or fp16.
bool runsOn16BitRate(const Op &op);

} // namespace pax
