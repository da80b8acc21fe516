//===- Run.cpp - A plan's programs run as threads of one process ----------===//
#include "runtime/Run.h"

#include "runtime/Exchange.h"

#include <new>
#include <stdexcept>
#include <string>
#include <thread>

namespace pax::runtime {

llvm::Error addDevices(Backend b, size_t n, unsigned first, DeviceSet &set) {
  while (set.devices.size() < n) {
    auto d = makeDevice(b, first + unsigned(set.devices.size()));
    if (!d)
      return d.takeError();
    set.devices.push_back(std::move(*d));
  }
  set.buffers.resize(set.devices.size());
  return llvm::Error::success();
}

namespace {
std::vector<int64_t>
shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

/// Runs program d of \p progs on `set.devices[d]`, each in a thread of its
/// own (in this thread where there is one program), and records each
/// device's error in \p errors. A device that fails aborts \p comm.
void runDeviceThreads(const plan::Plan &plan,
                      llvm::ArrayRef<const plan::DeviceProgram *> progs,
                      DeviceSet &set,
                      llvm::function_ref<DataFeed &(size_t)> feedOf,
                      Communicator &comm, std::vector<DeviceStats> &stats,
                      const ThreadRunOptions &options,
                      std::vector<std::string> &errors) {
  size_t n = progs.size();
  auto work = [&](size_t d) {
    // An exception (an arena the host cannot allocate) is the device's
    // error, not the process's end.
    try {
      if (auto err =
              runDevice(plan, *progs[d], feedOf(d), &comm, *set.devices[d],
                        set.buffers[d], stats[d], options))
        errors[d] = llvm::toString(std::move(err));
    } catch (const std::bad_alloc &) {
      errors[d] = "device " + std::to_string(progs[d]->device()) +
                  ": out of host memory";
    } catch (const std::exception &e) {
      errors[d] =
          "device " + std::to_string(progs[d]->device()) + ": " + e.what();
    }
    if (!errors[d].empty())
      comm.abort("device " + std::to_string(progs[d]->device()) + " failed");
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t d = 0; d < n; ++d)
      threads.emplace_back(work, d);
    for (std::thread &t : threads)
      t.join();
  }
}

/// The error to report from the devices' \p errors: the first one that is
/// not an abort another device caused, else the first one, else success.
llvm::Error firstDeviceError(const std::vector<std::string> &errors) {
  // The first device's own error, not the aborts it caused.
  for (const std::string &e : errors)
    if (!e.empty() && e.find("stopped: ") == std::string::npos)
      return llvm::createStringError(e);
  for (const std::string &e : errors)
    if (!e.empty())
      return llvm::createStringError(e);
  return llvm::Error::success();
}

/// Device \p d's block of output binding \p b, on the host.
llvm::Expected<Tensor> outputBlock(DeviceSet &set, size_t d,
                                   const plan::Binding &b) {
  return hostCopy(*set.devices[d], set.buffers[d][b.buffer()]);
}

/// Puts device \p d's owned block \p b into its output in \p outputs: the
/// block itself where it is the whole output, else copied in at its offset.
llvm::Error placeOwnedBlock(const plan::Plan &plan, DeviceSet &set, size_t d,
                            const plan::Binding &b,
                            std::vector<Tensor> &outputs) {
  if (b.index() >= outputs.size())
    return llvm::createStringError("an output binding names output " +
                                   llvm::Twine(b.index()));
  const plan::TensorInfo &info = plan.outputs(int(b.index()));
  Tensor &out = outputs[b.index()];
  auto got = outputBlock(set, d, b);
  if (!got)
    return got.takeError();
  // A block that is the whole output is copied as it is.
  bool whole = llvm::all_of(b.offset(), [](int64_t o) { return o == 0; }) &&
               got->shape == shapeOf(info.shape()) &&
               got->dtype == info.dtype();
  if (whole) {
    out = *got;
    return llvm::Error::success();
  }
  if (out.data.empty())
    out = Tensor::zeros(info.dtype(), shapeOf(info.shape()));
  std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
  moveOverlap(*got, lo, out, std::vector<int64_t>(lo.size(), 0), false);
  return llvm::Error::success();
}

/// Assembles \p outputs from the owners' blocks of the gathered outputs.
llvm::Error gatherOwnedBlocks(const plan::Plan &plan,
                              llvm::ArrayRef<const plan::DeviceProgram *> progs,
                              DeviceSet &set, std::vector<Tensor> &outputs,
                              const ThreadRunOptions &options) {
  outputs.assign(size_t(plan.outputs_size()), Tensor());
  for (size_t d = 0; d < progs.size(); ++d)
    for (const plan::Binding &b : progs[d]->outputs()) {
      if (!b.owner() || !options.gathers(b.index()))
        continue;
      if (auto err = placeOwnedBlock(plan, set, d, b, outputs))
        return err;
    }
  return llvm::Error::success();
}

/// Makes every gathered output that no block filled a tensor of zeros of
/// its type and shape.
void zeroUnfilledOutputs(const plan::Plan &plan, std::vector<Tensor> &outputs,
                         const ThreadRunOptions &options) {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].data.empty() && outputs[i].shape.empty() &&
        options.gathers(uint32_t(i))) {
      const plan::TensorInfo &info = plan.outputs(int(i));
      outputs[i] = Tensor::zeros(info.dtype(), shapeOf(info.shape()));
    }
}

/// Checks that device \p d's copy \p b of an output block equals that
/// block of the gathered output bit for bit; where \p fault is \p d, first
/// flips a bit of the copy and sets \p fault to -1 (testing).
llvm::Error checkReplica(const plan::Plan &plan, DeviceSet &set, size_t d,
                         const plan::Binding &b,
                         const std::vector<Tensor> &outputs, int &fault) {
  auto got = outputBlock(set, d, b);
  if (!got)
    return got.takeError();
  Tensor copy = std::move(*got);
  if (fault == int(d) && !copy.data.empty()) {
    copy.data[0] ^= 1; // a view of the device's buffer: flips it there
    fault = -1;
  }
  Tensor owner = Tensor::zeros(copy.dtype, copy.shape);
  std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
  moveOverlap(outputs[b.index()], std::vector<int64_t>(lo.size(), 0), owner, lo,
              false);
  if (owner.data != copy.data)
    return llvm::createStringError(
        "device " + llvm::Twine(d) + "'s copy of output '" +
        plan.outputs(int(b.index())).name() +
        "' differs from the copy it was gathered from: the replicas "
        "diverged");
  return llvm::Error::success();
}

/// Checks every copy of a gathered output block that its device does not
/// own against the gathered output.
llvm::Error checkReplicas(const plan::Plan &plan,
                          llvm::ArrayRef<const plan::DeviceProgram *> progs,
                          DeviceSet &set, const std::vector<Tensor> &outputs,
                          const ThreadRunOptions &options) {
  // Every other copy of an output block (a replicated result: a weight
  // every device updated) must be bit for bit the owner's: one update per
  // parameter, whatever device ran it.
  int fault = options.injectReplicaFault;
  for (size_t d = 0; d < progs.size(); ++d)
    for (const plan::Binding &b : progs[d]->outputs()) {
      if (b.owner() || b.index() >= outputs.size() ||
          !options.gathers(b.index()))
        continue;
      if (auto err = checkReplica(plan, set, d, b, outputs, fault))
        return err;
    }
  return llvm::Error::success();
}
} // namespace

llvm::Expected<Tensor> hostCopy(Device &device, const Tensor &b) {
  if (device.hostAccessible())
    return Tensor::view(b.dtype, b.shape, const_cast<uint8_t *>(b.data.data()),
                        false);
  Tensor host = Tensor::zeros(b.dtype, b.shape);
  if (auto err = device.download(b, host))
    return err;
  return host;
}

llvm::Error runThreads(const plan::Plan &plan,
                       llvm::ArrayRef<const plan::DeviceProgram *> progs,
                       DeviceSet &set,
                       llvm::function_ref<DataFeed &(size_t)> feedOf,
                       std::vector<Tensor> &outputs,
                       std::vector<DeviceStats> &stats,
                       const ThreadRunOptions &options) {
  size_t n = progs.size();
  if (set.devices.size() < n)
    return llvm::createStringError("no device for every program");
  set.buffers.resize(set.devices.size());
  auto comm = makeThreadCommunicator(plan);
  std::vector<std::string> errors(n);
  stats.assign(n, {});
  runDeviceThreads(plan, progs, set, feedOf, *comm, stats, options, errors);
  if (auto err = firstDeviceError(errors))
    return err;
  if (!options.gatherOutputs) {
    outputs.clear();
    return llvm::Error::success();
  }
  if (auto err = gatherOwnedBlocks(plan, progs, set, outputs, options))
    return err;
  zeroUnfilledOutputs(plan, outputs, options);
  return checkReplicas(plan, progs, set, outputs, options);
}

} // namespace pax::runtime
