//===- Feed.cpp - Weights and inputs for paxrun's devices -----------------===//
#include "tools/paxrun/Feed.h"

#include "frontend/TensorProto.h"
#include "runtime/Exchange.h"
#include "runtime/Run.h"
#include "tools/common/TensorFiles.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/text_format.h>

#include <cstring>
#include <optional>

namespace pax {

llvm::Error Feed::loadWeight(const plan::LoadWeight &load,
                             runtime::Tensor &out) {
  std::vector<int64_t> lo(load.offset().begin(), load.offset().end());
  if (lo.size() != out.shape.size())
    return llvm::createStringError("weight '" + load.tensor() +
                                   "': the load's offset has the wrong rank");
  if (auto it = overrides.find(load.tensor()); it != overrides.end()) {
    runtime::moveOverlap(it->second, std::vector<int64_t>(lo.size(), 0), out,
                         lo, false);
    return llvm::Error::success();
  }
  if (resumed && resumed->holds(load.tensor()))
    return resumed->read(load.tensor(), lo, out);
  switch (load.source()) {
  case plan::LoadWeight::FILL:
    for (int64_t i = 0; i < out.numel(); ++i)
      runtime::isFloatDType(out.dtype)
          ? out.setReal(i, load.fill())
          : out.setInteger(i, int64_t(load.fill()));
    return llvm::Error::success();
  case plan::LoadWeight::DENSE: {
    runtime::Tensor whole =
        runtime::Tensor::zeros(out.dtype, shapeOf(load.global_shape()));
    if (int64_t(load.dense().size()) != whole.bytes())
      return llvm::createStringError("dense weight '" + load.tensor() +
                                     "' has the wrong size");
    std::memcpy(whole.data.data(), load.dense().data(), load.dense().size());
    runtime::moveOverlap(whole, std::vector<int64_t>(lo.size(), 0), out, lo,
                         false);
    return llvm::Error::success();
  }
  case plan::LoadWeight::INITIALIZER:
  case plan::LoadWeight::INPUT: {
    auto whole = initializer(load, out.dtype);
    if (!whole)
      return whole.takeError();
    runtime::moveOverlap(**whole, std::vector<int64_t>(lo.size(), 0), out, lo,
                         false);
    return llvm::Error::success();
  }
  default:
    return llvm::createStringError("weight '" + load.tensor() +
                                   "' has an unknown source");
  }
}

llvm::Error Feed::input(const plan::Binding &b, runtime::Tensor &out) {
  if (b.index() >= inputs.size())
    return llvm::createStringError("a binding names input " +
                                   llvm::Twine(b.index()));
  std::vector<int64_t> lo(b.offset().begin(), b.offset().end());
  if (lo.size() != out.shape.size())
    return llvm::createStringError("an input binding has the wrong rank");
  runtime::moveOverlap(inputs[b.index()], std::vector<int64_t>(lo.size(), 0),
                       out, lo, false);
  return llvm::Error::success();
}

/// The whole initializer, read once for all devices.
llvm::Expected<const runtime::Tensor *>
Feed::initializer(const plan::LoadWeight &load, plan::DType dtype) {
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(load.tensor());
  if (it != cache.end())
    return &it->second;
  for (const auto &init : model.graph().initializer())
    if (init.name() == load.tensor()) {
      auto c = readTensorProto(init, modelDir);
      if (!c)
        return c.takeError();
      runtime::Tensor t =
          runtime::Tensor::zeros(dtype, shapeOf(load.global_shape()));
      if (t.numel() != int64_t(c->numel()))
        return llvm::createStringError("initializer '" + load.tensor() +
                                       "' has the wrong size");
      copyValues(*c, t);
      return &cache.emplace(load.tensor(), std::move(t)).first->second;
    }
  if (load.source() == plan::LoadWeight::INPUT) {
    // A weight fed at run time, like any other graph input.
    auto t = inputWeight(load, dtype);
    if (!t)
      return t.takeError();
    return &cache.emplace(load.tensor(), std::move(*t)).first->second;
  }
  return llvm::createStringError("the model has no initializer '" +
                                 load.tensor() + "'");
}

void ResidentFeed::keep(const std::string &name, std::vector<int64_t> lo,
                        runtime::Tensor block, bool owner) {
  blocks[name].push_back({{name, std::move(lo), std::move(block)}, owner});
}

std::vector<const TensorBlock *> ResidentFeed::ownedBlocks() const {
  std::vector<const TensorBlock *> out;
  for (const auto &[name, list] : blocks)
    for (const Block &b : list)
      if (b.owner)
        out.push_back(&b.b);
  return out;
}

llvm::Error ResidentFeed::loadWeight(const plan::LoadWeight &load,
                                     runtime::Tensor &out) {
  auto it = blocks.find(load.tensor());
  if (it != blocks.end()) {
    std::vector<int64_t> lo(load.offset().begin(), load.offset().end());
    for (const Block &kept : it->second) {
      const TensorBlock &b = kept.b;
      if (b.t.dtype != out.dtype || b.lo.size() != lo.size())
        continue;
      bool covers = true;
      for (size_t d = 0; d < lo.size(); ++d)
        covers &=
            lo[d] >= b.lo[d] && lo[d] + out.shape[d] <= b.lo[d] + b.t.shape[d];
      if (!covers)
        continue;
      runtime::moveOverlap(b.t, b.lo, out, lo, false);
      ++residentLoads;
      return llvm::Error::success();
    }
  }
  ++hostLoads;
  if (updatedNames.count(load.tensor())) {
    ++strayLoads;
    if (!hostCurrent)
      return llvm::createStringError(
          "weight '" + load.tensor() +
          "': the device keeps no updated block covering this load, and the "
          "host's copy is from an earlier step (the plan's update does not "
          "leave where this reader reads it)");
  }
  return host->loadWeight(load, out);
}

namespace {
/// Where \p prog's updates stay from step to step, read off the program in
/// one pass: the carried buffers (DeviceProgram.carried), the carried
/// buffer each update slice copies into, and the weights some load of
/// which is not carried.
class CarriedUpdates {
public:
  explicit CarriedUpdates(const plan::DeviceProgram &prog) {
    carried.insert(prog.carried().begin(), prog.carried().end());
    for (const plan::Instruction &inst : prog.instructions()) {
      if (inst.has_load() && !carried.count(inst.load().buffer()))
        loadedAnew.insert(inst.load().tensor());
      if (inst.has_slice() && carried.count(inst.slice().output()))
        copiedInto[inst.slice().input()] = inst.slice().output();
    }
  }
  /// The carried buffer that holds, after every run, the update \p b of
  /// weight \p name binds, when no load of that weight runs (so no run
  /// reads the block from the feed); else none.
  std::optional<uint32_t> of(const plan::Binding &b,
                             llvm::StringRef name) const {
    if (loadedAnew.count(name))
      return std::nullopt;
    if (carried.count(b.buffer()))
      return b.buffer();
    auto it = copiedInto.find(b.buffer());
    if (it == copiedInto.end())
      return std::nullopt;
    return it->second;
  }

private:
  llvm::DenseSet<uint32_t> carried;
  llvm::DenseMap<uint32_t, uint32_t> copiedInto;
  llvm::StringSet<> loadedAnew;
};
} // namespace

/// Keeps, on \p resident, the blocks of the updated weights (outputs
/// `update/NAME`) that \p prog's device computed into \p buffers: on a
/// host arena, a view of the carried buffer that holds the block from
/// step to step (the arena stays the session's), else moved off it (the
/// run is over); downloaded off a GPU's.
llvm::Error keepUpdates(const plan::Plan &plan, const plan::DeviceProgram &prog,
                        runtime::Device &device,
                        std::vector<runtime::Tensor> &buffers,
                        ResidentFeed &resident) {
  resident.beginStep();
  for (const plan::TensorInfo &out : plan.outputs())
    if (llvm::StringRef(out.name()).starts_with("update/"))
      resident.updated(out.name().substr(7));
  CarriedUpdates kept(prog);
  for (const plan::Binding &b : prog.outputs()) {
    if (b.index() >= uint32_t(plan.outputs_size()) ||
        b.buffer() >= buffers.size())
      continue;
    llvm::StringRef name = plan.outputs(int(b.index())).name();
    if (!name.consume_front("update/"))
      continue;
    runtime::Tensor block;
    std::optional<uint32_t> carried = kept.of(b, name);
    if (device.hostAccessible() && carried) {
      const plan::Buffer &w = prog.buffers(int(*carried));
      block = device.allocate(w.dtype(), {w.shape().begin(), w.shape().end()},
                              w.offset(), /*zero=*/false);
    } else if (device.hostAccessible()) {
      block = std::move(buffers[b.buffer()]).owned();
    } else {
      auto got = runtime::hostCopy(device, buffers[b.buffer()]);
      if (!got)
        return got.takeError();
      block = std::move(*got);
    }
    resident.keep(name.str(),
                  std::vector<int64_t>(b.offset().begin(), b.offset().end()),
                  std::move(block), b.owner());
  }
  return llvm::Error::success();
}

/// Reads the ONNX model \p plan names (binary, or text for names ending in
/// "txt").
std::vector<std::string> dataInputs(const onnx::ModelProto &model) {
  std::set<std::string> inits;
  for (const auto &t : model.graph().initializer())
    inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto &in : model.graph().input())
    if (!inits.count(in.name()))
      out.push_back(in.name());
  return out;
}

bool readSourceModel(const plan::Plan &plan, onnx::ModelProto &model) {
  auto buf = llvm::MemoryBuffer::getFile(plan.source(), false, false);
  bool text = llvm::StringRef(plan.source()).ends_with("txt");
  return buf && (text ? google::protobuf::TextFormat::ParseFromString(
                            (*buf)->getBuffer().str(), &model)
                      : model.ParseFromArray((*buf)->getBufferStart(),
                                             int((*buf)->getBufferSize())));
}

} // namespace pax
