//===- Run.cpp - A plan's programs run as threads of one process ----------===//
#include "runtime/Run.h"

#include "runtime/Exchange.h"

#include <string>
#include <thread>

namespace pax::runtime {

namespace {
std::vector<int64_t>
shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
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
  auto work = [&](size_t d) {
    if (auto err =
            runDevice(plan, *progs[d], feedOf(d), comm.get(), *set.devices[d],
                      set.buffers[d], stats[d], options)) {
      errors[d] = llvm::toString(std::move(err));
      comm->abort("device " + std::to_string(progs[d]->device()) + " failed");
    }
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
  // The first device's own error, not the aborts it caused.
  for (const std::string &e : errors)
    if (!e.empty() && e.find("stopped: ") == std::string::npos)
      return llvm::createStringError(e);
  for (const std::string &e : errors)
    if (!e.empty())
      return llvm::createStringError(e);
  if (!options.gatherOutputs) {
    outputs.clear();
    return llvm::Error::success();
  }
  auto block = [&](size_t d, const plan::Binding &b) {
    return hostCopy(*set.devices[d], set.buffers[d][b.buffer()]);
  };
  outputs.assign(size_t(plan.outputs_size()), Tensor());
  for (size_t d = 0; d < n; ++d)
    for (const plan::Binding &b : progs[d]->outputs()) {
      if (!b.owner() || !options.gathers(b.index()))
        continue;
      if (b.index() >= outputs.size())
        return llvm::createStringError("an output binding names output " +
                                       llvm::Twine(b.index()));
      const plan::TensorInfo &info = plan.outputs(int(b.index()));
      Tensor &out = outputs[b.index()];
      auto got = block(d, b);
      if (!got)
        return got.takeError();
      // A block that is the whole output is copied as it is.
      bool whole = llvm::all_of(b.offset(), [](int64_t o) { return o == 0; }) &&
                   got->shape == shapeOf(info.shape()) &&
                   got->dtype == info.dtype();
      if (whole) {
        out = *got;
        continue;
      }
      if (out.data.empty())
        out = Tensor::zeros(info.dtype(), shapeOf(info.shape()));
      std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
      moveOverlap(*got, lo, out, std::vector<int64_t>(lo.size(), 0), false);
    }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].data.empty() && outputs[i].shape.empty() &&
        options.gathers(uint32_t(i))) {
      const plan::TensorInfo &info = plan.outputs(int(i));
      outputs[i] = Tensor::zeros(info.dtype(), shapeOf(info.shape()));
    }
  // Every other copy of an output block (a replicated result: a weight
  // every device updated) must be bit for bit the owner's: one update per
  // parameter, whatever device ran it.
  int fault = options.injectReplicaFault;
  for (size_t d = 0; d < n; ++d)
    for (const plan::Binding &b : progs[d]->outputs()) {
      if (b.owner() || b.index() >= outputs.size() ||
          !options.gathers(b.index()))
        continue;
      auto got = block(d, b);
      if (!got)
        return got.takeError();
      Tensor copy = std::move(*got);
      if (fault == int(d) && !copy.data.empty()) {
        copy.data[0] ^= 1; // a view of the device's buffer: flips it there
        fault = -1;
      }
      Tensor owner = Tensor::zeros(copy.dtype, copy.shape);
      std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
      moveOverlap(outputs[b.index()], std::vector<int64_t>(lo.size(), 0), owner,
                  lo, false);
      if (owner.data != copy.data)
        return llvm::createStringError(
            "device " + llvm::Twine(d) + "'s copy of output '" +
            plan.outputs(int(b.index())).name() +
            "' differs from the copy it was gathered from: the replicas "
            "diverged");
    }
  return llvm::Error::success();
}

} // namespace pax::runtime
