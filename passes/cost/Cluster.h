//===- Cluster.h - The machine a strategy runs on: devices and links ------===//
#pragma once

#include "codegen/plan/CostDb.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <string>

namespace pax {

/// One level of the interconnect, as the alpha-beta model sees it.
struct LinkLevel {
  /// Bytes per second one device can send (one direction) at this level, when
  /// every device of its node communicates at the same time, as in an SPMD
  /// collective: a NIC shared by G devices counts G times slower.
  double bandwidth = 0;
  /// Seconds one step of a collective (one message) costs at this level.
  double latency = 0;
};

/// A homogeneous GPU cluster: `gpus` devices, `gpusPerNode` to a node, links
/// inside a node and across nodes. Devices are numbered node by node.
struct Cluster {
  std::string name;
  unsigned gpus = 1;
  unsigned gpusPerNode = 1;
  /// Peak rate of one device, FLOP/s.
  double peakFlops = 0;
  /// Memory of one device, bytes.
  double memoryBytes = 0;
  LinkLevel intraNode, interNode;
  /// Bytes per second one device sums partial sums at in a reducing
  /// collective (all-reduce, reduce-scatter), on top of moving them; 0:
  /// free (a GPU reduces as fast as its links deliver). Measured on hosts
  /// whose transports reduce in memory (paxrun --measure-links).
  double reduceBandwidth = 0;
  /// Measured op blocks (`--cost-db`): a block measured here is priced by
  /// its measurement, any other at peakFlops.
  std::shared_ptr<const CostDb> measured;
  /// Bytes per second one device reads and writes its own memory (HBM): a
  /// memory-bound kernel's rate, for the plan's roofline; 0: unknown.
  double memoryBandwidth = 0;
  /// Peak rate of one device on 16-bit floats (bf16, fp16 tensor cores),
  /// FLOP/s: the rate of products whose operands are 16-bit (paxc
  /// --precision=bf16|fp16); 0: peakFlops.
  double halfFlops = 0;
  /// Whether the runtime overlaps collectives with compute (a separate
  /// communication stream). paxrun does not: each device runs its
  /// instructions in order, a collective where it stands (a point-to-point
  /// send leaves its sender free). The simulator models either
  /// (Simulator.h); JSON `overlap_collectives`, false unless given.
  bool overlapCollectives = false;

  /// Number of nodes; a cluster smaller than one node is one (partial) node.
  unsigned nodes() const;
};

/// Names of the built-in presets (`--cluster=NAME`), in table order.
llvm::ArrayRef<llvm::StringRef> clusterPresetNames();

/// The preset called \p name, with its default GPU count; nullopt if none is.
std::optional<Cluster> clusterPreset(llvm::StringRef name);

/// Checks that \p c describes a machine that can exist: at least one GPU, a
/// node size that divides the GPU count when the cluster spans nodes, and
/// positive rates, memory and bandwidths, non-negative latencies. The error
/// names the cluster.
llvm::Error validateCluster(const Cluster &c);

/// The cluster of `--cluster=`: a preset name, or else the path of a JSON file
/// (format in docs/CLUSTERS.md). \p gpus (`--gpus=N`) and \p gpusPerNode
/// (`--gpus-per-node=G`) override the count and the node size; the result is
/// validated. Errors name the file and the field.
llvm::Expected<Cluster> makeCluster(llvm::StringRef presetOrJsonPath,
                                    std::optional<unsigned> gpus,
                                    std::optional<unsigned> gpusPerNode);

/// Reads a cluster from JSON text; \p origin (a file name) prefixes errors.
/// The result is not validated.
llvm::Expected<Cluster> parseClusterJson(llvm::StringRef text,
                                         llvm::StringRef origin);

/// \p c in the JSON format makeCluster() reads; they round-trip.
llvm::json::Value clusterToJson(const Cluster &c);

/// A table of the presets, for `paxc --list-clusters`.
std::string describeClusters();

} // namespace pax
