//===- Communicator.h - How the devices of a plan exchange blocks ---------===//
//
// One exchange call per Collective instruction, made by every member of its
// group in program order, over the buffers of the member's Device. Two
// transports: threads (every device of the plan in one process, whose
// devices read one another's buffers: the CPU's, or virtual devices on one
// GPU; ThreadCommunicator) and MPI ranks (runtime/mpi, through host
// memory). Each
// fills a device's output from the overlaps of its group's inputs with the
// output's box (runtime/Exchange.h), summing in rank order for partial
// sums, so every transport computes bit-identical results.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_COMMUNICATOR_H
#define PAX_RUNTIME_COMMUNICATOR_H

#include "runtime/Backend.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>

namespace pax::runtime {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// Runs collective \p c of \p plan on \p device, whose buffers \p in
  /// and \p out are buffers of \p dev: \p out receives the box its
  /// Exchange names, from the inputs of the members of its group.
  virtual llvm::Error exchange(const plan::Plan &plan, uint32_t device,
                               const plan::Collective &c, const Tensor &in,
                               Tensor &out, Device &dev) = 0;

  /// A device failed: every device waiting in (or later entering) a
  /// collective returns an error instead of waiting for it.
  virtual void abort(const std::string &why) = 0;

  /// Whether a point-to-point transfer's (SEND_RECV's) senders go on
  /// without waiting for its receivers (the transport keeps what they
  /// sent) on \p dev: a device may then send as soon as what it sends is
  /// computed.
  virtual bool buffersPointToPoint(const Device &dev) const {
    (void)dev;
    return false;
  }
};

/// The devices of a plan as threads of one process.
std::unique_ptr<Communicator> makeThreadCommunicator(const plan::Plan &plan);

/// Checks a collective against its plan: group, exchange, the device's
/// membership and its buffers' shapes. Every communicator calls it first.
llvm::Error checkCollective(const plan::Plan &plan, uint32_t device,
                            const plan::Collective &c, const Tensor &in,
                            const Tensor &out);

} // namespace pax::runtime

#endif // PAX_RUNTIME_COMMUNICATOR_H
