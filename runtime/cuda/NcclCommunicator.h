//===- NcclCommunicator.h - A plan's GPUs as MPI ranks, over NCCL -*- C++ -*-===//
//
// The transport of `mpirun -np N paxrun --backend=cuda`: device d of the
// plan is rank d, on its node-local GPU, and NCCL moves the blocks between
// GPUs without the host. An exchange is what MpiCommunicator does, in
// device memory: every member sends each other member the packed overlap of
// its input with that member's output box (grouped ncclSend / ncclRecv on
// the device's stream), and assembles its own output from what it receives
// in group order, its own input at its own position, so partial sums add in
// the CPU transports' order. A failing peer never leaves a rank waiting:
// NCCL's asynchronous errors are polled while a step waits, and any error
// aborts the communicator and every rank (abortMpiWorld).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define PAX_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/Communicator.h"
#include "runtime/mpi/MpiWorld.h"

namespace pax::runtime {

/// The NCCL communicator of this rank, whose plan device is \p device (a
/// CUDA device on the rank's GPU): rank 0 makes NCCL's id and broadcasts
/// it over \p world; every rank calls it at the same point, once per
/// process (a communicator serves every run and training step).
llvm::Expected<std::unique_ptr<Communicator>>
makeNcclCommunicator(const plan::Plan &plan, MpiWorld &world, Device &device);

} // namespace pax::runtime

#endif // PAX_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
