//===- NcclCommunicator.cpp - A plan's GPUs as MPI ranks, over NCCL -------===//
#include "runtime/cuda/NcclCommunicator.h"

#include "runtime/Exchange.h"
#include "runtime/cuda/CudaDevice.h"

#include "llvm/ADT/STLExtras.h"

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace pax::runtime {

namespace {

llvm::Error ncclError(ncclResult_t r, const llvm::Twine &what) {
  return llvm::createStringError("NCCL: " + what + ": " +
                                 ncclGetErrorString(r));
}

/// The overlap of two boxes: its first corner and its extent, per dim.
void overlapOf(const plan::Box &a, const plan::Box &b, size_t rank,
               std::vector<int64_t> &lo, std::vector<int64_t> &size) {
  lo.assign(rank, 0);
  size.assign(rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = std::max(a.lo(int(i)), b.lo(int(i)));
    int64_t h =
        std::min(a.lo(int(i)) + a.size(int(i)), b.lo(int(i)) + b.size(int(i)));
    lo[i] = l;
    size[i] = std::max<int64_t>(0, h - l);
  }
}

/// One packed block of an exchange's staging: the overlap it holds (its
/// first corner and extent, per dim), its bytes and its offset in the
/// staging block.
struct Part {
  std::vector<int64_t> lo, size;
  int64_t bytes = 0, offset = 0;
};

/// An exchange's staging: a packed send and a packed receive per group
/// member, in one block of `total` bytes at `data` on the device.
struct Staging {
  std::vector<Part> sends, recvs;
  int64_t total = 0;
  uint8_t *data = nullptr;

  /// Part \p p of the block, as a tensor of \p dtype.
  Tensor packed(const Part &p, plan::DType dtype) const {
    return Tensor::view(dtype, p.size, data + p.offset, false);
  }
};

/// Lays out \p p, the overlap of \p a and \p b, at the end of the staging
/// block of \p total bytes, each part 256-byte aligned; leaves it empty
/// where either box is.
void layOutPart(Part &p, const plan::Box &a, const plan::Box &b, size_t r,
                int64_t elementBytes, int64_t &total) {
  if (a.empty() || b.empty())
    return;
  overlapOf(a, b, r, p.lo, p.size);
  int64_t e = 1;
  for (int64_t s : p.size)
    e *= s;
  p.bytes = e * elementBytes;
  p.offset = total;
  total += (p.bytes + 255) / 256 * 256;
}

/// The staging of exchange \p x on member \p rank of group \p g (its boxes
/// \p myIn and \p myOut): what it receives from and sends to each peer.
Staging layOutStaging(const plan::Group &g, const plan::Exchange &x, int rank,
                      const plan::Box &myIn, const plan::Box &myOut, size_t r,
                      int64_t elementBytes) {
  size_t n = size_t(g.devices_size());
  Staging st;
  st.sends.resize(n);
  st.recvs.resize(n);
  for (size_t k = 0; k < n; ++k) {
    int peer = int(g.devices(int(k)));
    if (peer == rank)
      continue;
    layOutPart(st.recvs[k], x.in(peer), myOut, r, elementBytes, st.total);
    layOutPart(st.sends[k], myIn, x.out(peer), r, elementBytes, st.total);
  }
  return st;
}

/// Packs into \p st what each peer receives from this device: the overlap
/// of \p in (box \p myIn) with the peer's output box.
llvm::Error packSends(Device &dev, const Tensor &in, const plan::Box &myIn,
                      size_t r, const Staging &st, plan::DType dtype) {
  llvm::Error err = llvm::Error::success();
  for (size_t k = 0; k < st.sends.size() && !err; ++k)
    if (st.sends[k].bytes > 0) {
      Tensor t = st.packed(st.sends[k], dtype);
      err = dev.copyOverlap(in, boxLo(myIn, r), t, st.sends[k].lo, false);
    }
  return err;
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(ncclComm_t comm, int rank) : comm(comm), rank(rank) {}
  ~NcclCommunicator() override {
    if (comm)
      ncclCommDestroy(comm);
  }

  llvm::Error exchange(const plan::Plan &plan, uint32_t device,
                       const plan::Collective &c, const Tensor &in, Tensor &out,
                       Device &dev) override {
    llvm::Expected<cuda::StreamOf> so =
        prepareExchange(plan, device, c, in, out, dev);
    if (!so)
      return so.takeError();
    const plan::Group &g = plan.groups(int(c.group()));
    const plan::Exchange &x = plan.exchanges(int(c.exchange()));
    size_t r = in.shape.size();
    const plan::Box &myIn = x.in(int(device)), &myOut = x.out(int(device));
    int64_t elementBytes = dtypeBytes(out.dtype);
    // Staging: a packed send and a packed receive per peer, in one block.
    Staging st = layOutStaging(g, x, rank, myIn, myOut, r, elementBytes);
    if (st.total > 0)
      if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void **>(&st.data),
                                          size_t(st.total), so->stream))
        return llvm::createStringError(
            llvm::Twine("staging for an exchange: ") + cudaGetErrorString(e));
    // Pack what each peer receives from this device.
    llvm::Error err = packSends(dev, in, myIn, r, st, out.dtype);
    if (!err)
      err = sendAndReceive(g, st, *so);
    // Assemble in group order, as the other transports do.
    if (!err)
      err = dev.zero(out);
    if (!err && !myOut.empty())
      err = assemble(g, x.reduce(), in, myIn, out, myOut, st, dev);
    if (st.data)
      cudaFreeAsync(st.data, so->stream);
    if (!err)
      err = wait(*so);
    if (err) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    return err;
  }

  void abort(const std::string &why) override {
    if (comm) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    abortMpiWorld(why);
  }

private:
  /// Checks that this rank can run collective \p c for \p device and makes
  /// the GPU of \p dev current: \p dev's stream, or why it cannot.
  llvm::Expected<cuda::StreamOf> prepareExchange(const plan::Plan &plan,
                                                 uint32_t device,
                                                 const plan::Collective &c,
                                                 const Tensor &in, Tensor &out,
                                                 Device &dev) {
    if (auto err = checkCollective(plan, device, c, in, out))
      return err;
    if (!comm)
      return llvm::createStringError(
          "the NCCL communicator was aborted by an earlier failure");
    if (device != uint32_t(rank))
      return llvm::createStringError("device " + llvm::Twine(device) +
                                     " runs on rank " + llvm::Twine(rank));
    std::optional<cuda::StreamOf> so = cuda::streamOf(dev);
    if (!so)
      return llvm::createStringError(
          "the NCCL transport moves CUDA devices' buffers only");
    if (cudaError_t e = cudaSetDevice(so->gpu))
      return llvm::createStringError(cudaGetErrorString(e));
    return *so;
  }

  /// Receives each peer's part of \p st and sends each peer its own, in one
  /// NCCL group on the stream of \p so: the first call's error, if any.
  llvm::Error sendAndReceive(const plan::Group &g, const Staging &st,
                             const cuda::StreamOf &so) {
    llvm::Error err = llvm::Error::success();
    const std::vector<Part> &sends = st.sends, &recvs = st.recvs;
    ncclGroupStart();
    for (size_t k = 0; k < sends.size(); ++k) {
      int peer = int(g.devices(int(k)));
      if (recvs[k].bytes > 0)
        if (ncclResult_t res =
                ncclRecv(st.data + recvs[k].offset, size_t(recvs[k].bytes),
                         ncclUint8, peer, comm, so.stream);
            res != ncclSuccess && !err)
          err = ncclError(res, "receive");
      if (sends[k].bytes > 0)
        if (ncclResult_t res =
                ncclSend(st.data + sends[k].offset, size_t(sends[k].bytes),
                         ncclUint8, peer, comm, so.stream);
            res != ncclSuccess && !err)
          err = ncclError(res, "send");
    }
    if (ncclResult_t res = ncclGroupEnd(); res != ncclSuccess && !err)
      err = ncclError(res, "group");
    return err;
  }

  /// Adds into \p out (box \p myOut, zeroed) this device's own input \p in
  /// (box \p myIn) and the parts received in \p st, in group order;
  /// \p reduce: add rather than copy.
  llvm::Error assemble(const plan::Group &g, bool reduce, const Tensor &in,
                       const plan::Box &myIn, Tensor &out,
                       const plan::Box &myOut, const Staging &st, Device &dev) {
    size_t r = in.shape.size();
    llvm::Error err = llvm::Error::success();
    std::vector<int64_t> outLo = boxLo(myOut, r);
    for (size_t k = 0; k < st.recvs.size() && !err; ++k) {
      int peer = int(g.devices(int(k)));
      if (peer == rank) {
        if (!myIn.empty())
          err = dev.copyOverlap(in, boxLo(myIn, r), out, outLo, reduce);
      } else if (st.recvs[k].bytes > 0) {
        Tensor t = st.packed(st.recvs[k], out.dtype);
        err = dev.copyOverlap(t, st.recvs[k].lo, out, outLo, reduce);
      }
    }
    return err;
  }

  /// Waits for the stream, polling NCCL's asynchronous error so that a
  /// peer that failed ends the wait.
  llvm::Error wait(const cuda::StreamOf &so) {
    while (true) {
      cudaError_t e = cudaStreamQuery(so.stream);
      if (e == cudaSuccess)
        return llvm::Error::success();
      if (e != cudaErrorNotReady)
        return llvm::createStringError(llvm::Twine("GPU ") +
                                       llvm::Twine(so.gpu) + ": " +
                                       cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      if (ncclResult_t r = ncclCommGetAsyncError(comm, &async);
          r != ncclSuccess)
        return ncclError(r, "the communicator's state");
      if (async != ncclSuccess && async != ncclInProgress)
        return ncclError(async, "a peer failed");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ncclComm_t comm;
  int rank;
};

} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
makeNcclCommunicator(const plan::Plan &plan, MpiWorld &world, Device &device) {
  if (uint32_t(world.size()) != plan.devices())
    return llvm::createStringError(
        "the plan was compiled for " + llvm::Twine(plan.devices()) +
        " devices, but MPI runs " + llvm::Twine(world.size()) + " ranks");
  std::optional<cuda::StreamOf> so = cuda::streamOf(device);
  if (!so)
    return llvm::createStringError(
        "the NCCL transport needs a CUDA device (--backend=cuda)");
  ncclUniqueId id;
  std::vector<uint8_t> bytes(sizeof id, 0);
  if (world.rank() == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return ncclError(r, "an id for the communicator");
    std::memcpy(bytes.data(), &id, sizeof id);
  }
  if (auto err = world.broadcastFromRoot(bytes))
    return err;
  if (bytes.size() != sizeof id)
    return llvm::createStringError("NCCL: a bad id from rank 0");
  std::memcpy(&id, bytes.data(), sizeof id);
  if (cudaError_t e = cudaSetDevice(so->gpu))
    return llvm::createStringError(cudaGetErrorString(e));
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&comm, world.size(), id, world.rank());
      r != ncclSuccess)
    return ncclError(r, "rank " + llvm::Twine(world.rank()) + " of " +
                            llvm::Twine(world.size()) + " could not join");
  return std::make_unique<NcclCommunicator>(comm, world.rank());
}

} // namespace pax::runtime
