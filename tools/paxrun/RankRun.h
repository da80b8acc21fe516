//===- RankRun.h - One device per MPI rank ----------------------*- C++ -*-===//
//
// Under mpirun, each rank runs its device's program on the MPI transport
// (NCCL between GPUs) and rank 0 gathers every rank's output blocks and
// statistics, as the threads runner fills them.
//
//===----------------------------------------------------------------------===//
#pragma once

#ifdef PAX_HAVE_MPI
#include "runtime/Device.h"
#include "runtime/Run.h"
#include "tools/paxrun/Feed.h"

#include "codegen/plan/Plan.pb.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace pax {
namespace runtime {
class MpiWorld;
}

/// Under MPI: runs this rank's program (on `deviceSet.devices[0]`) on the
/// MPI transport and gathers every rank's output blocks and statistics on
/// rank 0, which fills \p outputs and \p stats as runThreads does. False
/// when some rank could not start (it said why; rank 0 names it) and none
/// ran. Once the ranks run, a failure on any of them ends them all
/// (MPI_Abort), so that none waits for another. With \p resident (a
/// training session), weights load through it and the rank keeps its
/// updated blocks there.
llvm::Expected<bool> runRank(const plan::Plan &plan, runtime::MpiWorld &world,
                             runtime::DeviceSet &deviceSet, Feed &feed,
                             std::vector<runtime::Tensor> &outputs,
                             std::vector<runtime::DeviceStats> &stats,
                             ResidentFeed *resident = nullptr,
                             const runtime::RunOptions &options = {});

} // namespace pax
#endif // PAX_HAVE_MPI
