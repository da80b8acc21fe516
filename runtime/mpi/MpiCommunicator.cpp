//===- MpiCommunicator.cpp - A plan's devices as MPI ranks ----------------===//
#include "runtime/mpi/MpiCommunicator.h"

#include "runtime/Exchange.h"
#include "runtime/PlanCheck.h"
#include "runtime/mpi/MpiCalls.h"
#include "runtime/mpi/MpiWorld.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace pax::runtime {

namespace {
std::vector<int64_t> boxSize(const plan::Box &b) {
  return std::vector<int64_t>(b.size().begin(), b.size().end());
}


class MpiCommunicator : public Communicator {
public:
  MpiCommunicator(MPI_Comm comm, int rank, int tagBound)
      : comm(comm), rank(rank), tagBound(tagBound) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    // Sends still in flight complete before their buffers go.
    MPI_Waitall(int(pending.size()), pending.data(), MPI_STATUSES_IGNORE);
    MPI_Comm_free(&comm);
  }

  llvm::Error exchange(const plan::Plan &plan, uint32_t device,
                       const plan::Collective &c, const Tensor &in, Tensor &out,
                       Device &dev) override;

  bool buffersPointToPoint(const Device &) const override { return true; }

  void abort(const std::string &why) override { abortMpiWorld(why); }

private:
  /// The exchange over host tensors.
  llvm::Error exchangeHost(const plan::Plan &plan, uint32_t device,
                           const plan::Collective &c, const Tensor &in,
                           Tensor &out);

  /// Fills \p out from this rank's input and what it \p received, per
  /// member of \p g.
  void assemble(const plan::Group &g, const plan::Exchange &x, const Tensor &in,
                const std::vector<std::vector<uint8_t>> &received,
                Tensor &out) const;
  /// Frees the buffers of the point-to-point sends that completed.
  llvm::Error reapSends();

  MPI_Comm comm;
  int rank, tagBound;
  /// A point-to-point transfer's sends (SEND_RECV) do not wait for their
  /// receivers (a pipeline stage goes on with its next microbatch): their
  /// requests and buffers, until they complete.
  std::vector<MPI_Request> pending;
  std::vector<std::vector<uint8_t>> pendingBuffers;
};

llvm::Error MpiCommunicator::reapSends() {
  if (pending.empty())
    return llvm::Error::success();
  int all = 0;
  PAX_MPI_TRY(MPI_Testall(int(pending.size()), pending.data(), &all,
                          MPI_STATUSES_IGNORE));
  if (all) {
    pending.clear();
    pendingBuffers.clear();
  }
  return llvm::Error::success();
}


// A member sends each other member the overlap of its input with that
// member's output box, and receives from each the overlap of that
// member's input with its own output box. Both sides compute the same
// overlaps from the plan, so an empty one is skipped on both and no
// receive waits for a message that never comes.
// MPI moves host memory: a device whose buffers are not the host's
// exchanges through host copies of them.
llvm::Error MpiCommunicator::exchange(const plan::Plan &plan, uint32_t device,
                                      const plan::Collective &c,
                                      const Tensor &in, Tensor &out,
                                      Device &dev) {
  if (auto err = checkCollective(plan, device, c, in, out))
    return err;
  if (dev.hostAccessible())
    return exchangeHost(plan, device, c, in, out);
  Tensor hostIn = Tensor::zeros(in.dtype, in.shape);
  Tensor hostOut = Tensor::zeros(out.dtype, out.shape);
  if (auto err = dev.download(in, hostIn))
    return err;
  if (auto err = exchangeHost(plan, device, c, hostIn, hostOut))
    return err;
  return dev.upload(hostOut, out);
}

llvm::Error MpiCommunicator::exchangeHost(const plan::Plan &plan,
                                          uint32_t device,
                                          const plan::Collective &c,
                                          const Tensor &in, Tensor &out) {
  if (device != uint32_t(rank))
    return llvm::createStringError("device " + llvm::Twine(device) +
                                   " runs on rank " + llvm::Twine(rank));
  const plan::Group &g = plan.groups(int(c.group()));
  const plan::Exchange &x = plan.exchanges(int(c.exchange()));
  size_t r = tensorRank(x);
  if (auto err = checkPeerBoxes(x, g, r))
    return err;
  const plan::Box &myIn = x.in(int(device)), &myOut = x.out(int(device));
  int tag = int(c.exchange() % (uint32_t(tagBound) + 1));
  int64_t elementBytes = dtypeBytes(out.dtype);
  size_t n = size_t(g.devices_size());
  std::vector<std::vector<uint8_t>> received(n), sent(n);
  std::vector<MPI_Request> requests, sends;
  if (auto err = reapSends())
    return err;
  bool pointToPoint = x.kind() == plan::Collective::SEND_RECV;
  for (size_t k = 0; k < n; ++k) {
    int peer = int(g.devices(int(k)));
    if (peer == rank)
      continue;
    const plan::Box &peerIn = x.in(peer), &peerOut = x.out(peer);
    if (int64_t e = overlapElements(peerIn, myOut, r); e > 0) {
      received[k].resize(size_t(e * elementBytes));
      if (auto err =
              postBytes(false, received[k].data(), int64_t(received[k].size()),
                        peer, tag, comm, requests))
        return err;
    }
    if (overlapElements(myIn, peerOut, r) > 0) {
      sent[k] =
          packOverlap(in, boxLo(myIn, r), boxLo(peerOut, r), boxSize(peerOut));
      if (auto err =
              postBytes(true, sent[k].data(), int64_t(sent[k].size()), peer,
                        tag, comm, pointToPoint ? sends : requests))
        return err;
    }
  }
  PAX_MPI_TRY(
      MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  // A point-to-point transfer's sends complete later (reapSends).
  pending.insert(pending.end(), sends.begin(), sends.end());
  if (!sends.empty())
    for (std::vector<uint8_t> &b : sent)
      if (!b.empty())
        pendingBuffers.push_back(std::move(b));
  assemble(g, x, in, received, out);
  return llvm::Error::success();
}

void MpiCommunicator::assemble(
    const plan::Group &g, const plan::Exchange &x, const Tensor &in,
    const std::vector<std::vector<uint8_t>> &received, Tensor &out) const {
  size_t r = tensorRank(x);
  const plan::Box &myIn = x.in(rank), &myOut = x.out(rank);
  // In group order, as ThreadCommunicator does.
  std::fill(out.data.begin(), out.data.end(), 0);
  if (myOut.empty())
    return;
  std::vector<int64_t> outLo = boxLo(myOut, r);
  for (size_t k = 0; k < size_t(g.devices_size()); ++k) {
    int peer = int(g.devices(int(k)));
    const plan::Box &peerIn = x.in(peer);
    if (peer == rank) {
      if (!myIn.empty())
        moveOverlap(in, boxLo(myIn, r), out, outLo, x.reduce());
    } else if (!received[k].empty()) {
      unpackOverlap(received[k], boxLo(peerIn, r), boxSize(peerIn), out, outLo,
                    x.reduce());
    }
  }
}
} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
makeMpiCommunicator(const plan::Plan &plan) {
  int rank = 0, size = 0;
  PAX_MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PAX_MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (uint32_t(size) != plan.devices())
    return llvm::createStringError("the plan was compiled for " +
                                   planDevicesText(plan) + ", but MPI runs " +
                                   llvm::Twine(size) + " ranks");
  // MPI guarantees tags up to at least 32767; libraries allow more.
  int *bound = nullptr, found = 0;
  PAX_MPI_TRY(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound, &found));
  int tagBound = found && bound ? *bound : 32767;
  MPI_Comm comm;
  PAX_MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return std::make_unique<MpiCommunicator>(comm, rank, tagBound);
}

} // namespace pax::runtime
