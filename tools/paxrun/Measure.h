//===- Measure.h - What the machine paxrun runs on costs ---------*- C++
//-*-===//
//
// Measurements that make paxc's cost model this machine's:
//  - `paxrun PROBE.paxplan --write-cost-db=FILE`: times every compute of a
//    cost probe (paxc --emit=cost-probe) on the backend's device and writes
//    the cost database (codegen/plan/CostDb.h) `paxc --cost-db` reads;
//  - `paxrun --measure-links=FILE --devices=N` (or under mpirun): times
//    all-reduces, all-gathers and all-to-alls of growing sizes over every
//    device (contiguous and strided blocks, as plans move them) and a
//    large matrix product on one, fits the cost model's alpha-beta link
//    (latency, bandwidth) to them, and writes a cluster JSON
//    (docs/CLUSTERS.md) for `paxc --cluster`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Device.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace pax {

class Feed;

/// The feed of probes: fills only (a probe reads nothing from a model).
Feed &fillFeed();

/// Runs \p probe (a cost probe) on \p device, loading the model's
/// constants from \p feed: a warm-up run, then \p runs
/// timed runs; writes each cost key's mean seconds per call to \p path
/// (nothing with \p path empty: an MPI rank but the first).
/// \p backend and \p threads describe where it ran.
llvm::Error writeCostDb(const plan::Plan &probe, Feed &feed,
                        runtime::Device &device, unsigned runs,
                        llvm::StringRef backend, unsigned threads,
                        llvm::StringRef path);

/// The link probe of \p devices devices (\p perNode to a node): f32
/// all-reduces, all-gathers (of blocks of rows and of columns) and
/// all-to-alls over every device, sizes from 4 KiB to
/// 8 MiB, each repeated.
plan::Plan linkProbePlan(unsigned devices, unsigned perNode);

/// One device's matrix product of two n x n f32 matrices.
plan::Plan gemmProbePlan(int64_t n);

/// Runs a plan on this process's devices with RunOptions::trace and
/// returns device 0's (this rank's) events, one per instruction.
using TracedRun =
    std::function<llvm::Expected<std::vector<runtime::TraceEvent>>(
        const plan::Plan &)>;

/// --measure-links: the link probe and the matrix product through \p run
/// (after a warm-up run of each), fitted, written to \p path as the cluster
/// "measured" of \p devices devices, \p perNode to a node, and prints the
/// fit; with \p path empty (an MPI rank but the first) writes nothing.
llvm::Error measureLinks(unsigned devices, unsigned perNode,
                         const TracedRun &run, llvm::StringRef path);

/// One collective's measured time, as the fit sees it.
struct LinkSample {
  double seconds;
  /// The cost model's latency steps, bytes over the link and bytes summed
  /// for it: seconds ~ steps * latency + bytes / bandwidth + reduced /
  /// reduce bandwidth.
  double steps, bytes, reduced;
};

/// The latency, bandwidth and reduce bandwidth (0: reducing costs nothing
/// measurable) of the cost model that fit \p samples best in relative error
/// (least squares of (model - measured) / measured, no parameter negative),
/// and that root-mean-square relative error.
struct LinkFit {
  double latency = 0, bandwidth = 0, reduceBandwidth = 0, rmsRelError = 0;
};
llvm::Expected<LinkFit> fitLink(llvm::ArrayRef<LinkSample> samples);

} // namespace pax
