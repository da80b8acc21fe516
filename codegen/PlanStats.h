//===- PlanStats.h - What a device's program costs per step ---------------===//
//
// For `paxc --plan-stats`: per device program, the compute ops it runs
// (counted before any fusion, and as the plan's instructions), the
// kernels it launches for them (a fused kernel runs several), the bytes of
// device memory those kernels and its collectives read and write, the least
// such traffic any program of the same plan could have, and a roofline
// estimate of the step on one device of the cluster. Computed from the plan
// alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pax {

/// One compute kernel's work: its flops and the bytes it reads and writes;
/// \c kind is its op's kind, or "generated" for a kernel codegen wrote.
struct KernelWork {
  double flops = 0, bytes = 0;
  std::string kind;
  /// The slower of its arithmetic at \p peakFlops and its traffic at
  /// \p memoryBandwidth (bytes/s).
  double seconds(double peakFlops, double memoryBandwidth) const {
    return std::max(flops / peakFlops, bytes / memoryBandwidth);
  }
};

struct ProgramStats {
  /// Compute ops before fusion: those of the program before the
  /// graph-level fusions (attention's chain, a GELU's group, a bias add,
  /// the copies read through), which \c planOps became.
  int64_t ops = 0;
  int64_t planOps = 0;      ///< compute instructions in the plan
  int64_t kernels = 0;      ///< compute kernels launched per step
  int64_t fusedKernels = 0; ///< of those, kernels that run several ops
  /// Bytes the compute kernels and the collectives read and write.
  double trafficBytes = 0;
  /// The least of it: every weight and graph input read once, every output
  /// written once, and every tensor that must be in memory written and read
  /// where it must: the operands and results of matrix products,
  /// convolutions, attention and recurrent ops (library kernels), and the
  /// buffers of collectives.
  double minTrafficBytes = 0;
  std::vector<KernelWork> work; ///< per compute kernel, in order
  /// The kernels' forward flops (a training step's program has its
  /// backward ops in it).
  double flops() const;
  /// Each kernel at the slower of its arithmetic at \p peakFlops and its
  /// traffic at \p memoryBandwidth (bytes/s), one after another; 0 when
  /// either rate is unknown.
  double rooflineSeconds(double peakFlops, double memoryBandwidth) const;
};

/// The stats of one device's program.
ProgramStats programStats(const plan::DeviceProgram &prog);

/// `{"devices": [{"device", "ops", "kernels", "fused_kernels", "flops",
/// "traffic_bytes", "min_traffic_bytes", "roofline_s", "by_kind"}]}` for
/// \p plan's device programs; "by_kind" maps each kernel kind (an op kind,
/// or "generated") to its "kernels", "flops", "traffic_bytes" and
/// "roofline_s".
llvm::json::Value planStatsJson(const plan::Plan &plan, double peakFlops,
                                double memoryBandwidth);

} // namespace pax
