//===- MpiCommunicator.h - A plan's devices as MPI ranks -------*- C++ -*-===//
//
// The MPI transport: device d of a plan runs on rank d of MPI_COMM_WORLD,
// one device per process. An exchange sends every other member of the
// group the packed overlap of this device's input with that member's
// output box, and assembles its own output from what it receives in group
// order, with its own input at its own position, so that partial sums add
// in the same order as ThreadCommunicator's and results are bit-identical.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_MPI_MPICOMMUNICATOR_H
#define PAX_RUNTIME_MPI_MPICOMMUNICATOR_H

#include "runtime/Communicator.h"

namespace pax::runtime {

/// The communicator of rank r running device r of \p plan. MPI must be
/// running (MpiWorld) with as many ranks as the plan has devices. Every
/// rank creates it at the same point (it duplicates MPI_COMM_WORLD, so the
/// exchanges' messages are apart from any others), and destroys it before
/// MPI is finalized. Its abort() ends every rank (abortMpiWorld).
llvm::Expected<std::unique_ptr<Communicator>>
makeMpiCommunicator(const plan::Plan &plan);

} // namespace pax::runtime

#endif // PAX_RUNTIME_MPI_MPICOMMUNICATOR_H
